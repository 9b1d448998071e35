//! Nothing silent: what a finished session says about probes that never fired, spans that
//! started and never ended, and ends that matched no start.

use super::output::Snapshot;
use super::program::Plan;

/// The warnings of a finished session: one per probe that never fired (after its filters),
/// per span whose starts found no end, and per span whose ends found no start.
pub fn silent(plan: &Plan, last: &Snapshot) -> Vec<String> {
    let mut out = Vec::new();
    for (i, span) in plan.spans.iter().enumerate() {
        let [starts, ends] = last.hits.get(i).copied().unwrap_or([0, 0]);
        let measured: u64 = last
            .spans
            .get(i)
            .map_or(0, |g| g.values().map(|b| b.count).sum());
        if starts == 0 {
            out.push(never_fired(&span.start.label, &span.start.probe, true));
        }
        if ends == 0 {
            out.push(never_fired(&span.end.label, &span.end.probe, false));
        }
        if starts > 0 && ends > 0 && measured == 0 {
            out.push(format!(
                "span '{}': {starts} starts and {ends} ends, but no end matched a start: is the key ({}) the same value at both probes?",
                span.name, span.key
            ));
        } else if starts > 0 && ends > 0 && measured < starts.min(ends) / 2 {
            out.push(format!(
                "span '{}': {starts} starts and {ends} ends but only {measured} spans: most ends matched no start",
                span.name
            ));
        }
    }
    for (i, rate) in plan.rates.iter().enumerate() {
        let total: u64 = last.rates.get(i).map_or(0, |g| g.values().sum());
        if total == 0 {
            out.push(never_fired(&rate.site.label, &rate.site.probe, true));
        }
    }
    for (i, value) in plan.values.iter().enumerate() {
        let total: u64 = last
            .values
            .get(i)
            .map_or(0, |g| g.values().map(|b| b.count).sum());
        if total == 0 {
            out.push(never_fired(&value.site.label, &value.site.probe, true));
        }
    }
    out
}

fn never_fired(label: &str, probe: &super::spec::Probe, filtered_by_process: bool) -> String {
    use super::spec::Probe;
    let question = match probe {
        Probe::Usdt { .. } | Probe::Uprobe { .. } | Probe::Uretprobe { .. }
            if filtered_by_process =>
        {
            "is the process traced, is the code reached?"
        }
        Probe::Usdt { .. } | Probe::Uprobe { .. } | Probe::Uretprobe { .. } => {
            "is the code reached?"
        }
        _ if filtered_by_process => {
            "did the kernel reach it in a traced process, do its filters ever hold?"
        }
        _ => "did the kernel reach it, do its filters ever hold?",
    };
    format!("probe {label} never fired: {question}")
}

/// Whether anything was measured: a span, a counted event or a value.
pub fn measured(last: &Snapshot) -> bool {
    let spans = last
        .spans
        .iter()
        .chain(&last.values)
        .any(|g| g.values().any(|b| b.count > 0));
    spans || last.rates.iter().any(|g| g.values().any(|&n| n > 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::compile::{Request, compile};
    use crate::live::fields::Formats;
    use crate::live::program::Target;
    use crate::live::spec::parse_span;

    fn plan() -> Plan {
        let request = Request {
            spans: vec![parse_span("work=uprobe:/t:work..uretprobe:/t:work", None).unwrap()],
            rates: vec![],
            values: vec![],
            by: None,
            target: Target::Everything,
            interval_s: 1,
            duration_s: None,
            record: None,
            marker: None,
            ends_anywhere: false,
        };
        compile(&request, &Formats::new()).unwrap()
    }

    #[test]
    fn a_probe_that_never_fired_is_named_with_the_question_to_ask() {
        let mut last = Snapshot::new(1, 0, 0, false);
        let w = silent(&plan(), &last);
        assert_eq!(w.len(), 2, "{w:?}");
        assert_eq!(
            w[0],
            "probe uprobe:/t:work never fired: is the process traced, is the code reached?"
        );
        assert!(w[1].starts_with("probe uretprobe:/t:work never fired"));
        last.hits[0] = [5, 0];
        let w = silent(&plan(), &last);
        assert_eq!(w.len(), 1);
        assert!(!measured(&last));
    }

    #[test]
    fn ends_that_match_no_start_are_reported() {
        let mut last = Snapshot::new(1, 0, 0, false);
        last.hits[0] = [5, 7];
        let w = silent(&plan(), &last);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("5 starts and 7 ends, but no end matched"),
            "{}",
            w[0]
        );
        assert!(w[0].contains("the key (tid)"), "{}", w[0]);
    }
}
