//! From what the user asked (rules of the shared grammar over probes) to a [`Plan`] of bpftrace
//! expressions: every field resolved at its probe, every filter typed, every key checked to
//! compare like with like. Pure: the tracepoint formats come in as data.

use super::fields::{Formats, filter_expr, key_expr, resolve};
use super::program::{Marker, Plan, RatePlan, Site, SpanPlan, Target, ValuePlan};
use super::spec::{Endpoint, Probe, SpanSpec, SpecError, ValueSpec};

/// What a live session was asked to measure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// spans
    pub spans: Vec<SpanSpec>,
    /// probes counted per interval
    pub rates: Vec<Endpoint>,
    /// value distributions
    pub values: Vec<ValueSpec>,
    /// split everything by this field (taken at a span's end, at a rate's or value's probe)
    pub by: Option<String>,
    /// whose events count
    pub target: Target,
    /// seconds between snapshots
    pub interval_s: u64,
    /// stop after this many seconds
    pub duration_s: Option<u64>,
    /// keep individual spans (`--record-spans`)
    pub record: Option<u64>,
    /// latscope's own probe that says every probe is attached
    pub marker: Option<Marker>,
    /// spans may end in any process (`--key` was given: a value both sides see)
    pub ends_anywhere: bool,
}

impl Request {
    /// Every probe, in the order of the plan.
    pub fn probes(&self) -> Vec<&Probe> {
        let mut probes: Vec<&Probe> = self
            .spans
            .iter()
            .flat_map(|s| [&s.start.event, &s.end.event])
            .collect();
        probes.extend(self.rates.iter().map(|r| &r.event));
        probes.extend(self.values.iter().map(|v| &v.probe.event));
        probes
    }
}

/// The endpoint as written: the probe, then its filters.
pub fn label(endpoint: &Endpoint) -> String {
    let mut text = endpoint.event.to_string();
    for f in &endpoint.filters {
        text.push(':');
        text.push_str(&f.to_string());
    }
    text
}

fn site(endpoint: &Endpoint, formats: &Formats) -> Result<Site, SpecError> {
    let label = label(endpoint);
    let filters = endpoint
        .filters
        .iter()
        .map(|f| filter_expr(f, &endpoint.event, formats, &label))
        .collect::<Result<_, _>>()?;
    // The task an event is about: the woken task of a wake-up, else the running task.
    let task = match &endpoint.event {
        Probe::Tracepoint { subsys, name }
            if subsys == "sched"
                && WAKE_UPS.contains(&name.as_str())
                && formats_known(&endpoint.event, formats) =>
        {
            "args->pid".to_string()
        }
        _ => "pid".to_string(),
    };
    Ok(Site {
        probe: endpoint.event.clone(),
        filters,
        label,
        task,
    })
}

/// The scheduler's wake-up tracepoints, whose `pid` field is the task woken: a process tree's
/// filter tests that task, not the waker (an interrupt, another process).
const WAKE_UPS: [&str; 3] = ["sched_wakeup", "sched_wakeup_new", "sched_waking"];

/// Whether the tracepoint's fields are known (not merely assumed, as without tracefs).
fn formats_known(probe: &Probe, formats: &Formats) -> bool {
    match probe {
        Probe::Tracepoint { subsys, name } => formats
            .get(&(subsys.clone(), name.clone()))
            .is_some_and(Option::is_some),
        _ => false,
    }
}

fn group(
    by: Option<&str>,
    probe: &Probe,
    formats: &Formats,
) -> Result<Option<super::fields::Resolved>, SpecError> {
    by.map(|b| resolve(b, probe, formats).map_err(|e| SpecError::Field(format!("--by {b}: {e}"))))
        .transpose()
}

fn span(
    spec: &SpanSpec,
    by: Option<&str>,
    formats: &Formats,
    ends_anywhere: bool,
) -> Result<SpanPlan, SpecError> {
    let (start, end) = (&spec.start.event, &spec.end.event);
    let mut start_key = Vec::new();
    let mut end_key = Vec::new();
    for (s, e) in spec.key.start.iter().zip(&spec.key.end) {
        let in_span =
            |err: SpecError| SpecError::Field(format!("span '{}': --key: {err}", spec.name));
        let rs = resolve(s, start, formats).map_err(in_span)?;
        let re = resolve(e, end, formats).map_err(in_span)?;
        if rs.text != re.text {
            let kind = |t: bool| if t { "text" } else { "an integer" };
            return Err(SpecError::Field(format!(
                "span '{}': --key {s}={e} compares {} at {start} with {} at {end}",
                spec.name,
                kind(rs.text),
                kind(re.text)
            )));
        }
        start_key.push(key_expr(&rs));
        end_key.push(key_expr(&re));
    }
    if start_key.is_empty() {
        // No key: the next end closes the open start (one at a time).
        start_key.push("0".into());
        end_key.push("0".into());
    }
    Ok(SpanPlan {
        name: spec.name.clone(),
        start: site(&spec.start, formats)?,
        end: site(&spec.end, formats)?,
        start_key,
        end_key,
        group: group(by, end, formats)?,
        key: spec.key.to_string(),
        ends_anywhere,
    })
}

fn value(spec: &ValueSpec, by: Option<&str>, formats: &Formats) -> Result<ValuePlan, SpecError> {
    let probe = &spec.probe.event;
    let field = resolve(&spec.field, probe, formats)?;
    if field.text {
        return Err(SpecError::Field(format!(
            "--value {}: {} is text at {probe}; a value must be an integer",
            spec.name, spec.field
        )));
    }
    Ok(ValuePlan {
        name: spec.name.clone(),
        site: site(&spec.probe, formats)?,
        expr: field.expr,
        group: group(by, probe, formats)?,
    })
}

/// The plan of `request`, with the tracepoints' fields from `formats`.
pub fn compile(request: &Request, formats: &Formats) -> Result<Plan, SpecError> {
    let by = request.by.as_deref();
    let spans = request
        .spans
        .iter()
        .map(|s| span(s, by, formats, request.ends_anywhere))
        .collect::<Result<Vec<_>, _>>()?;
    let rates = request
        .rates
        .iter()
        .map(|r| {
            Ok(RatePlan {
                site: site(r, formats)?,
                group: group(by, &r.event, formats)?,
            })
        })
        .collect::<Result<Vec<_>, SpecError>>()?;
    let values = request
        .values
        .iter()
        .map(|v| value(v, by, formats))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Plan {
        spans,
        rates,
        values,
        grouped: by.is_some(),
        target: request.target.clone(),
        interval_s: request.interval_s.max(1),
        duration_s: request.duration_s,
        record: request.record,
        marker: request.marker.clone(),
    })
}
