//! Comparing two saved results item by item: which spans, configurations or commands got
//! faster, slower, stayed the same, or moved in opposite directions in the body and the tail.
//! The rule is [`crate::stats::change`]'s, the same one `bench` applies to its candidates.

use crate::doc::compare::{ChangePct, CompareDoc, Compared};
use crate::doc::rule::RuleDoc;
use crate::doc::{Item, Summary};
use crate::stats::ab::change_pct;
use crate::stats::change::{Rule, judge};
use crate::stats::parallel_map;

/// Compares every item present in both, in the order of `before`; the items are judged on all
/// cores (a bootstrap per item).
pub fn compare(
    before_file: &str,
    after_file: &str,
    before: &[Item],
    after: &[Item],
    rule: Rule,
) -> CompareDoc {
    let rule_doc = RuleDoc {
        noise: rule.noise,
        alpha: rule.alpha,
        time: Default::default(),
    };
    let mut doc = CompareDoc::new(before_file.into(), after_file.into(), rule_doc);
    let mut pairs = Vec::new();
    for b in before {
        match after.iter().find(|a| a.label() == b.label()) {
            Some(a) => pairs.push((b, a)),
            None => doc.only_before.push(b.label()),
        }
    }
    doc.only_after = after
        .iter()
        .filter(|a| !before.iter().any(|b| b.label() == a.label()))
        .map(Item::label)
        .collect();
    doc.items = parallel_map(&pairs, |(b, a)| compare_item(b, a, rule));
    doc
}

fn compare_item(b: &Item, a: &Item, rule: Rule) -> Compared {
    Compared {
        name: b.name.clone(),
        group: b.group.clone(),
        before: b.summary,
        after: a.summary,
        change_pct: change_pcts(&b.summary, &a.summary),
        change: judge(b.evidence(), a.evidence(), rule),
    }
}

/// Relative changes of the p50, p99 and mean.
pub fn change_pcts(b: &Summary, a: &Summary) -> ChangePct {
    let pct = |x: Option<f64>, y: Option<f64>| change_pct(x?, y?);
    let f = |v: Option<u64>| v.map(|v| v as f64);
    ChangePct {
        p50: pct(f(b.p50), f(a.p50)),
        p99: pct(f(b.p99), f(a.p99)),
        mean: pct(b.mean, a.mean),
    }
}

/// Two bench results pair their commands by name; when they have none in common (an A/B of two
/// builds: `./old` against `./new`), by position instead. Renames the `after` items to their
/// partners' names in that case and says so; returns `None` when nothing changed.
pub fn pair_by_position(before: &[Item], after: &mut [Item]) -> Option<String> {
    if before
        .iter()
        .any(|b| after.iter().any(|a| a.label() == b.label()))
    {
        return None;
    }
    let mut pairs = Vec::new();
    for (b, a) in before.iter().zip(after.iter_mut()) {
        pairs.push(format!("{} ↔ {}", b.name, a.name));
        a.name = b.name.clone();
    }
    (!pairs.is_empty()).then(|| {
        format!(
            "no command in common: paired by position ({})",
            pairs.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doc::Data;
    use crate::stats::change::Verdict;

    fn item(name: &str, values: &[(f64, u64)]) -> Item {
        Item {
            name: name.into(),
            group: None,
            summary: Summary::of_points(values),
            data: Data::Samples(values.to_vec()),
        }
    }

    #[test]
    fn items_on_one_side_only_are_listed() {
        let c = compare(
            "a",
            "b",
            &[item("gone", &[(1.0, 1)])],
            &[item("new", &[(1.0, 1)])],
            Rule::default(),
        );
        assert!(c.items.is_empty());
        assert_eq!(
            (c.only_before, c.only_after),
            (vec!["gone".to_string()], vec!["new".to_string()])
        );
    }

    #[test]
    fn items_are_paired_by_name_and_group_and_judged_in_order() {
        let v: Vec<(f64, u64)> = (1..=50).map(|i| (f64::from(i), 2)).collect();
        let slow: Vec<(f64, u64)> = v.iter().map(|&(x, c)| (x * 2.0, c)).collect();
        let c = compare(
            "a",
            "b",
            &[item("x", &v), item("y", &v)],
            &[item("y", &v), item("x", &slow)],
            Rule::default(),
        );
        let got: Vec<(&str, Verdict)> = c
            .items
            .iter()
            .map(|i| (i.name.as_str(), i.change.verdict))
            .collect();
        assert_eq!(got, [("x", Verdict::Slower), ("y", Verdict::Same)]);
        assert_eq!(c.items[0].change_pct.p50, Some(100.0));
    }
}
