//! Nothing silent: what a finished session says about probes that never fired, spans that
//! started and never ended, and ends that matched no start.

use super::output::Snapshot;
use super::program::{MAX_PIDS, Plan};
use super::runner::Outcome;

/// The warnings of a session as it ended: bpftrace stopped before its final snapshot, the map
/// of traced processes filled up, and, when it finished, [`silent`]'s.
pub fn warnings(plan: &Plan, outcome: &Outcome) -> Vec<String> {
    let mut warnings = Vec::new();
    if !outcome.finished {
        warnings.push(
            "bpftrace stopped before its final snapshot: totals are from the last interval"
                .to_string(),
        );
    }
    if outcome.pids_full {
        warnings.push(format!(
            "more than {MAX_PIDS} traced processes were alive at once: processes forked after that were not traced"
        ));
    }
    if outcome.finished {
        warnings.extend(silent(plan, &outcome.last));
    }
    warnings
}

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

    fn outcome(finished: bool, pids_full: bool) -> Outcome {
        Outcome {
            last: Snapshot::new(1, 0, 0, false),
            rate_history: Vec::new(),
            finished,
            error: None,
            stopped_by: "interrupted".to_string(),
            record: None,
            pids_full,
            launch_error: None,
        }
    }

    #[test]
    fn a_session_warns_of_an_early_stop_a_full_pid_map_and_silent_probes() {
        let w = warnings(&plan(), &outcome(true, false));
        assert_eq!(w, silent(&plan(), &outcome(true, false).last));
        let w = warnings(&plan(), &outcome(false, true));
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].starts_with("bpftrace stopped before its final snapshot"));
        assert!(w[1].starts_with(&format!("more than {MAX_PIDS} traced processes")));
    }
}
