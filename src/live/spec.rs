//! What to trace: probe specs, spans, keys and groups, as given on the command line.

use std::fmt;
use std::str::FromStr;

pub use crate::rule::Key;

/// One probe point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// `usdt:PATH:PROVIDER:NAME`
    Usdt {
        /// executable or library
        path: String,
        /// provider
        provider: String,
        /// probe name
        name: String,
    },
    /// `uprobe:PATH:SYMBOL`: function entry
    Uprobe {
        /// executable or library
        path: String,
        /// function
        symbol: String,
    },
    /// `uretprobe:PATH:SYMBOL`: function return
    Uretprobe {
        /// executable or library
        path: String,
        /// function
        symbol: String,
    },
    /// `tracepoint:SUBSYS:NAME`: a kernel tracepoint, with the fields of its tracefs `format`
    Tracepoint {
        /// subsystem (`sched`)
        subsys: String,
        /// event (`sched_wakeup`)
        name: String,
    },
    /// `kprobe:FUNC`: kernel function entry
    Kprobe {
        /// kernel function
        func: String,
    },
    /// `kretprobe:FUNC`: kernel function return
    Kretprobe {
        /// kernel function
        func: String,
    },
}

/// The probe kinds, as written in front of a spec.
pub const KINDS: [&str; 6] = [
    "usdt",
    "uprobe",
    "uretprobe",
    "tracepoint",
    "kprobe",
    "kretprobe",
];

/// A spec that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// Not a probe spec.
    #[error(
        "'{0}' is not a probe: expected tracepoint:SUBSYS:NAME, kprobe:FUNC, kretprobe:FUNC, usdt:PATH:PROVIDER:NAME, uprobe:PATH:SYMBOL or uretprobe:PATH:SYMBOL, then :FIELD==VALUE filters"
    )]
    Probe(String),
    /// Not a span spec, or a rule that does not read.
    #[error("{0}")]
    Rule(String),
    /// Not a value spec.
    #[error(
        "'{0}' is not a value: expected NAME=PROBE[:FILTER...]:FIELD, e.g. size=tracepoint:syscalls:sys_exit_read:ret or delay=usdt:PATH:PROVIDER:NAME:arg1"
    )]
    Value(String),
    /// A field that the probe does not have, or used where it cannot be.
    #[error("{0}")]
    Field(String),
    /// A part of a probe that would not reach bpftrace as one token: it could change the
    /// generated program (which runs as root), so it is refused, never escaped.
    #[error("'{spec}': {why}")]
    Unsafe {
        /// the whole spec
        spec: String,
        /// what is wrong, and what is allowed
        why: String,
    },
}

impl From<crate::rule::RuleError> for SpecError {
    fn from(e: crate::rule::RuleError) -> Self {
        SpecError::Rule(e.0)
    }
}

/// Longest path accepted in a probe spec (PATH_MAX).
const MAX_PATH: usize = 4096;
/// Longest provider, probe or symbol name accepted.
const MAX_IDENT: usize = 256;

/// A path as bpftrace reads it in an attach point: letters, digits and `_ . / - + @ ~` only. A
/// space, quote, brace, colon, comma, semicolon, `$` or control character would end the
/// attach point early or start program text.
fn check_path(spec: &str, path: &str) -> Result<(), SpecError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_./-+@~".contains(c);
    let why = if path.len() > MAX_PATH {
        Some(format!("the path is longer than {MAX_PATH} bytes"))
    } else if path.contains("//") {
        // bpftrace could read the rest of the line as a comment.
        Some("the path contains //, which bpftrace could read as a comment (write one /)".into())
    } else {
        path.chars().find(|&c| !allowed(c)).map(|c| {
            format!(
                "the path contains {c:?}, which bpftrace would not read as part of a path (allowed: letters, digits, _ . / - + @ ~; make a symlink without it)"
            )
        })
    };
    why.map_or(Ok(()), |why| {
        Err(SpecError::Unsafe {
            spec: spec.to_string(),
            why,
        })
    })
}

/// A provider, probe or function name: a C identifier; `.` is also allowed after the first
/// character in function symbols (`foo.constprop.0`).
fn check_ident(spec: &str, what: &str, name: &str, dots: bool) -> Result<(), SpecError> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || (dots && c == '.'));
    if first_ok && rest_ok && name.len() <= MAX_IDENT {
        return Ok(());
    }
    Err(SpecError::Unsafe {
        spec: spec.to_string(),
        why: format!(
            "the {what} '{}' is not an identifier (a letter or _, then letters, digits, _{}; at most {MAX_IDENT})",
            name.escape_debug(),
            if dots { " and ." } else { "" }
        ),
    })
}

impl Probe {
    /// The file the probe is in (user-space probes).
    pub fn path(&self) -> Option<&str> {
        match self {
            Probe::Usdt { path, .. }
            | Probe::Uprobe { path, .. }
            | Probe::Uretprobe { path, .. } => Some(path),
            _ => None,
        }
    }

    /// Whether the probe has `argN` (a return probe has only `retval`, a tracepoint fields).
    pub fn has_arguments(&self) -> bool {
        matches!(
            self,
            Probe::Usdt { .. } | Probe::Uprobe { .. } | Probe::Kprobe { .. }
        )
    }

    /// Whether the probe has `retval`.
    pub fn has_retval(&self) -> bool {
        matches!(self, Probe::Uretprobe { .. } | Probe::Kretprobe { .. })
    }

    /// The last part of the spec: what a span is named after.
    pub fn event_name(&self) -> &str {
        match self {
            Probe::Usdt { name, .. } | Probe::Tracepoint { name, .. } => name,
            Probe::Uprobe { symbol, .. } | Probe::Uretprobe { symbol, .. } => symbol,
            Probe::Kprobe { func } | Probe::Kretprobe { func } => func,
        }
    }

    /// How many `:`-parts follow the kind.
    fn arity(kind: &str) -> Option<usize> {
        Some(match kind {
            "usdt" => 3,
            "uprobe" | "uretprobe" | "tracepoint" => 2,
            "kprobe" | "kretprobe" => 1,
            _ => return None,
        })
    }

    /// The probe of `parts` (its kind, then exactly its parts); `spec` for messages.
    fn from_parts(spec: &str, parts: &[&str]) -> Result<Probe, SpecError> {
        let bad = || SpecError::Probe(spec.to_string());
        let (kind, rest) = parts.split_first().ok_or_else(bad)?;
        if Probe::arity(kind) != Some(rest.len()) || rest.iter().any(|p| p.is_empty()) {
            return Err(bad());
        }
        let s = |i: usize| rest[i].to_string();
        Ok(match *kind {
            "usdt" => {
                check_path(spec, rest[0])?;
                check_ident(spec, "provider", rest[1], false)?;
                check_ident(spec, "probe name", rest[2], false)?;
                Probe::Usdt {
                    path: s(0),
                    provider: s(1),
                    name: s(2),
                }
            }
            "uprobe" | "uretprobe" => {
                check_path(spec, rest[0])?;
                check_ident(spec, "function", rest[1], true)?;
                let (path, symbol) = (s(0), s(1));
                if *kind == "uprobe" {
                    Probe::Uprobe { path, symbol }
                } else {
                    Probe::Uretprobe { path, symbol }
                }
            }
            "tracepoint" => {
                check_ident(spec, "subsystem", rest[0], false)?;
                check_ident(spec, "tracepoint", rest[1], false)?;
                Probe::Tracepoint {
                    subsys: s(0),
                    name: s(1),
                }
            }
            _ => {
                check_ident(spec, "kernel function", rest[0], true)?;
                if *kind == "kprobe" {
                    Probe::Kprobe { func: s(0) }
                } else {
                    Probe::Kretprobe { func: s(0) }
                }
            }
        })
    }
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Probe::Usdt {
                path,
                provider,
                name,
            } => write!(f, "usdt:{path}:{provider}:{name}"),
            Probe::Uprobe { path, symbol } => write!(f, "uprobe:{path}:{symbol}"),
            Probe::Uretprobe { path, symbol } => write!(f, "uretprobe:{path}:{symbol}"),
            Probe::Tracepoint { subsys, name } => write!(f, "tracepoint:{subsys}:{name}"),
            Probe::Kprobe { func } => write!(f, "kprobe:{func}"),
            Probe::Kretprobe { func } => write!(f, "kretprobe:{func}"),
        }
    }
}

impl FromStr for Probe {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Probe::from_parts(s, &crate::rule::parts(s))
    }
}

/// A probe and the filters it must pass: `tracepoint:sched:sched_wakeup:comm==myapp`.
pub type Endpoint = crate::rule::Endpoint<Probe>;

/// Parses `PROBE[:FIELD==V][:FIELD!=V][:FIELD^=V]`.
pub fn parse_endpoint(spec: &str) -> Result<Endpoint, SpecError> {
    let (probe, filters) = split_probe(spec)?;
    if let Some(extra) = filters.iter().find(|p| !crate::rule::is_filter(p)) {
        return Err(SpecError::Rule(format!(
            "'{spec}': '{extra}' is neither part of the probe nor a FIELD==VALUE filter"
        )));
    }
    let filters = filters
        .iter()
        .map(|p| crate::rule::Filter::parse(p, spec))
        .collect::<Result<_, _>>()?;
    Ok(Endpoint {
        event: probe,
        filters,
    })
}

/// The probe of `spec` and the `:`-parts after it.
fn split_probe(spec: &str) -> Result<(Probe, Vec<&str>), SpecError> {
    let parts = crate::rule::parts(spec);
    let arity = parts
        .first()
        .and_then(|k| Probe::arity(k))
        .ok_or_else(|| SpecError::Probe(spec.to_string()))?;
    if parts.len() < arity + 1 {
        return Err(SpecError::Probe(spec.to_string()));
    }
    let probe = Probe::from_parts(spec, &parts[..=arity])?;
    Ok((probe, parts[arity + 1..].to_vec()))
}

/// A span of probes: [`crate::rule::SpanRule`] over [`Probe`].
pub type SpanSpec = crate::rule::SpanRule<Probe>;

/// Parses `NAME=START..END` (the name may be left out). The key is `key` when given, else the
/// default: `arg0` for two USDT probes (a request id), `tid` otherwise (a call on its thread).
pub fn parse_span(spec: &str, key: Option<&Key>) -> Result<SpanSpec, SpecError> {
    let mut rule = crate::rule::parse_span(
        spec,
        &KINDS,
        |s| parse_endpoint(s).map_err(|e| crate::rule::RuleError(e.to_string())),
        |p: &Probe| p.event_name().to_string(),
    )?;
    rule.key = match key {
        Some(key) => key.clone(),
        None => default_key(&rule.start.event, &rule.end.event),
    };
    Ok(rule)
}

/// The key when none is given.
pub fn default_key(start: &Probe, end: &Probe) -> Key {
    let both_usdt = matches!((start, end), (Probe::Usdt { .. }, Probe::Usdt { .. }));
    let field = if both_usdt { "arg0" } else { "tid" };
    Key {
        start: vec![field.into()],
        end: vec![field.into()],
    }
}

/// `--value NAME=PROBE[:FILTER...]:FIELD`: the distribution of one integer field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueSpec {
    /// name in results
    pub name: String,
    /// the probe and its filters
    pub probe: Endpoint,
    /// the field whose values are counted (`argN`, `retval`, a tracepoint field)
    pub field: String,
}

impl FromStr for ValueSpec {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || SpecError::Value(s.to_string());
        let (name, rest) = s.split_once('=').ok_or_else(bad)?;
        crate::rule::check_name(name)?;
        let (body, field) = rest.rsplit_once(':').ok_or_else(bad)?;
        if !crate::rule::is_identifier(field) || crate::rule::is_filter(field) {
            return Err(bad());
        }
        let probe = parse_endpoint(body).map_err(|e| match e {
            SpecError::Probe(_) => bad(),
            other => other,
        })?;
        Ok(ValueSpec {
            name: name.to_string(),
            probe,
            field: field.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_specs_parse_with_colons_only_as_separators() {
        assert_eq!(
            "usdt:/usr/lib/libmirserver.so.58:mir_server_wayland:sw_buffer_committed".parse(),
            Ok(Probe::Usdt {
                path: "/usr/lib/libmirserver.so.58".into(),
                provider: "mir_server_wayland".into(),
                name: "sw_buffer_committed".into()
            })
        );
        assert_eq!(
            "uretprobe:/bin/x:work".parse(),
            Ok(Probe::Uretprobe {
                path: "/bin/x".into(),
                symbol: "work".into()
            })
        );
        assert_eq!(
            "tracepoint:sched:sched_wakeup".parse(),
            Ok(Probe::Tracepoint {
                subsys: "sched".into(),
                name: "sched_wakeup".into()
            })
        );
        assert_eq!(
            "kretprobe:vfs_read".parse(),
            Ok(Probe::Kretprobe {
                func: "vfs_read".into()
            })
        );
        for bad in [
            "usdt:/bin/x:onlyname",
            "kprobe:",
            "tracepoint:sched",
            "uprobe:/bin/x:",
            "nothing",
            "kprobe:a:b",
        ] {
            assert!(bad.parse::<Probe>().is_err(), "{bad}");
        }
    }

    #[test]
    fn endpoints_take_filters_after_the_probe() {
        let e = parse_endpoint("tracepoint:sched:sched_wakeup:comm==myapp:prio!=120").unwrap();
        assert_eq!(e.event.to_string(), "tracepoint:sched:sched_wakeup");
        assert_eq!(e.filters.len(), 2);
        assert_eq!(e.filters[1].to_string(), "prio!=120");
        let e = parse_endpoint("kprobe:do_sys_openat2:arg0^=x").unwrap();
        assert_eq!(e.filters[0].field, "arg0");
        assert!(parse_endpoint("tracepoint:sched:sched_wakeup:extra").is_err());
    }

    #[test]
    fn span_keys_default_to_arg0_for_usdt_and_tid_otherwise() {
        let s = parse_span("req=usdt:/t:p:start..usdt:/t:p:end", None).unwrap();
        assert_eq!(s.key.start, ["arg0"]);
        let s = parse_span("call=uprobe:/t:work..uretprobe:/t:work", None).unwrap();
        assert_eq!(s.key.end, ["tid"]);
        let k = Key::parse("pid=next_pid").unwrap();
        let s = parse_span(
            "tracepoint:sched:sched_wakeup..tracepoint:sched:sched_switch",
            Some(&k),
        )
        .unwrap();
        assert_eq!(s.name, "sched_wakeup_to_sched_switch");
        assert_eq!(
            (s.key.start[0].as_str(), s.key.end[0].as_str()),
            ("pid", "next_pid")
        );
    }

    #[test]
    fn span_paths_may_contain_dot_dot() {
        let s = parse_span("x=usdt:../bin/t:p:a..usdt:../bin/t:p:b", None).unwrap();
        assert_eq!(s.start.event.path(), Some("../bin/t"));
        assert_eq!(s.end.event.path(), Some("../bin/t"));
    }

    #[test]
    fn values_name_a_field_after_the_probe_and_its_filters() {
        let v: ValueSpec = "delay=usdt:/t:p:start:arg1".parse().unwrap();
        assert_eq!(v.field, "arg1");
        let v: ValueSpec = "size=tracepoint:syscalls:sys_exit_read:comm==x:ret"
            .parse()
            .unwrap();
        assert_eq!((v.field.as_str(), v.probe.filters.len()), ("ret", 1));
        assert!("bad name=usdt:/t:p:s:arg1".parse::<ValueSpec>().is_err());
        assert!("v=usdt:/t:p:s".parse::<ValueSpec>().is_err());
    }

    #[test]
    fn hostile_probe_specs_are_refused_with_the_reason() {
        let hostile = [
            r#"uprobe:/bin/true:main/{system("id")}"#,
            "uprobe:/bin/true:main{",
            "uprobe:/bin/true:ma;in",
            "uprobe:/bin/true:$x",
            "uprobe:/bin/tr ue:main",
            "uprobe:/bin/tr,ue:main",
            "usdt:/bin/true:p{:n",
            "usdt:/bin/true:p:n;",
            "usdt:/bin/$HOME:p:n",
            "uretprobe:/bin/true:1main",
            "uprobe://bin/true:main",
            "tracepoint:sched:sched_wakeup{",
            "tracepoint:sch ed:x",
            "kprobe:do_exit/{x}",
        ];
        for spec in hostile {
            let e = spec.parse::<Probe>().unwrap_err();
            assert!(matches!(e, SpecError::Unsafe { .. }), "{spec:?} gave {e:?}");
        }
        // A quote is refused too, as not a probe (it would hide the separators after it).
        for spec in [
            "uprobe:/bin/tr\"ue:main",
            "uprobe:'/bin/x y':main",
            "usdt:/bin/x'y:p:n",
        ] {
            assert!(spec.parse::<Probe>().is_err(), "{spec}");
        }
        let long = format!("uprobe:/bin/true:{}", "a".repeat(300));
        assert!(long.parse::<Probe>().is_err());
        let long_path = format!("uprobe:/{}:main", "a".repeat(5000));
        assert!(long_path.parse::<Probe>().is_err());
        for ok in [
            "usdt:/usr/lib/x86_64-linux-gnu/libmirserver.so.58:mir_server_wayland:sw_buffer_committed",
            "uprobe:./server:handle_request",
            "uretprobe:/usr/lib/libc++.so.1:_ZN3foo3barEv",
            "uprobe:/opt/app-1.2/bin/x:foo.constprop.0",
            "kprobe:vfs_read.cold",
        ] {
            assert!(ok.parse::<Probe>().is_ok(), "{ok}");
        }
    }

    #[test]
    fn hostile_span_names_are_refused() {
        for name in ["a{b", "a b", "a;b", "a\nb", "a$"] {
            let spec = format!("{name}=uprobe:/bin/true:main..uretprobe:/bin/true:main");
            assert!(parse_span(&spec, None).is_err(), "{name:?}");
        }
        let long = format!(
            "{}=uprobe:/bin/true:main..uretprobe:/bin/true:main",
            "n".repeat(65)
        );
        assert!(parse_span(&long, None).is_err());
    }
}
