//! What to trace: probe specs, spans, keys and groups, as given on the command line.

use std::fmt;
use std::str::FromStr;

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
}

/// A spec that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// Not a probe spec.
    #[error(
        "'{0}' is not a probe: expected usdt:PATH:PROVIDER:NAME, uprobe:PATH:SYMBOL or uretprobe:PATH:SYMBOL"
    )]
    Probe(String),
    /// Not a span spec.
    #[error(
        "'{0}' is not a span: expected NAME=START..END, e.g. commit=usdt:/usr/lib/libfoo.so:foo:start..usdt:/usr/lib/libfoo.so:foo:end"
    )]
    Span(String),
    /// Not a key part.
    #[error(
        "'{0}' is not a key: expected tid, pid or argN (N from 0 to 11), or a comma list of them"
    )]
    Key(String),
    /// Not a group.
    #[error("'{0}' is not a grouping: expected tid, pid, comm or argN")]
    Group(String),
    /// Not a value spec.
    #[error("'{0}' is not a value: expected NAME=usdt:PATH:PROVIDER:NAME:argN")]
    Value(String),
    /// An argument asked of a probe that has none.
    #[error(
        "span '{span}': {what} uses an argument, but {probe} is a uretprobe, which has only a return value; use --key tid"
    )]
    NoArguments {
        /// span name
        span: String,
        /// key or group
        what: &'static str,
        /// the probe
        probe: String,
    },
    /// A name that bpftrace cannot use in a map name.
    #[error("'{0}' is not a valid name: use letters, digits and _ (at most 64)")]
    Name(String),
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
    /// The file the probe is in.
    pub fn path(&self) -> &str {
        match self {
            Probe::Usdt { path, .. }
            | Probe::Uprobe { path, .. }
            | Probe::Uretprobe { path, .. } => path,
        }
    }

    /// Whether the probe has arguments (a uretprobe has only a return value).
    pub fn has_arguments(&self) -> bool {
        !matches!(self, Probe::Uretprobe { .. })
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
        }
    }
}

impl FromStr for Probe {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || SpecError::Probe(s.to_string());
        let (kind, rest) = s.split_once(':').ok_or_else(bad)?;
        let nonempty = |parts: &[&str]| parts.iter().all(|p| !p.is_empty());
        match kind {
            "usdt" => {
                let mut parts = rest.rsplitn(3, ':');
                let (name, provider, path) = (parts.next(), parts.next(), parts.next());
                let (Some(name), Some(provider), Some(path)) = (name, provider, path) else {
                    return Err(bad());
                };
                if !nonempty(&[name, provider, path]) {
                    return Err(bad());
                }
                check_path(s, path)?;
                check_ident(s, "provider", provider, false)?;
                check_ident(s, "probe name", name, false)?;
                Ok(Probe::Usdt {
                    path: path.into(),
                    provider: provider.into(),
                    name: name.into(),
                })
            }
            "uprobe" | "uretprobe" => {
                let (path, symbol) = rest.rsplit_once(':').ok_or_else(bad)?;
                if !nonempty(&[path, symbol]) {
                    return Err(bad());
                }
                check_path(s, path)?;
                check_ident(s, "function", symbol, true)?;
                let (path, symbol) = (path.to_string(), symbol.to_string());
                Ok(if kind == "uprobe" {
                    Probe::Uprobe { path, symbol }
                } else {
                    Probe::Uretprobe { path, symbol }
                })
            }
            _ => Err(bad()),
        }
    }
}

/// What pairs an end with its start, or what splits a span into groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// thread id
    Tid,
    /// process id
    Pid,
    /// thread name (groups only)
    Comm,
    /// probe argument N
    Arg(u8),
}

impl Field {
    fn parse(s: &str, allow_comm: bool) -> Option<Field> {
        match s.trim() {
            "tid" => Some(Field::Tid),
            "pid" => Some(Field::Pid),
            "comm" if allow_comm => Some(Field::Comm),
            other => {
                let n: u8 = other.strip_prefix("arg")?.parse().ok()?;
                (n < 12).then_some(Field::Arg(n))
            }
        }
    }

    /// The bpftrace expression.
    pub fn expr(self) -> String {
        match self {
            Field::Tid => "tid".into(),
            Field::Pid => "pid".into(),
            Field::Comm => "comm".into(),
            Field::Arg(n) => format!("arg{n}"),
        }
    }

    /// The name used in labels.
    pub fn name(self) -> String {
        self.expr()
    }
}

/// Parses `--key`: `tid`, `pid`, `argN`, or a comma list.
pub fn parse_key(s: &str) -> Result<Vec<Field>, SpecError> {
    s.split(',')
        .map(|part| Field::parse(part, false).ok_or_else(|| SpecError::Key(s.to_string())))
        .collect()
}

/// Parses `--by`.
pub fn parse_group(s: &str) -> Result<Field, SpecError> {
    Field::parse(s, true).ok_or_else(|| SpecError::Group(s.to_string()))
}

/// A span: a start probe and an end probe, paired by a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanSpec {
    /// name in results
    pub name: String,
    /// where it starts
    pub start: Probe,
    /// where it ends
    pub end: Probe,
    /// what pairs them
    pub key: Vec<Field>,
}

fn check_name(name: &str) -> Result<(), SpecError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(SpecError::Name(name.to_string()))
    }
}

impl SpanSpec {
    /// Parses `NAME=START..END`. The key is `key` when given, else `tid` when either end is a
    /// uprobe or uretprobe (a function call is paired on its thread) and `arg0` for USDT pairs.
    pub fn parse(s: &str, key: Option<&[Field]>) -> Result<SpanSpec, SpecError> {
        let bad = || SpecError::Span(s.to_string());
        let (name, probes) = s.split_once('=').ok_or_else(bad)?;
        check_name(name)?;
        // The separator is the `..` before a probe kind, so paths may contain `..` themselves.
        let split = ["..usdt:", "..uprobe:", "..uretprobe:"]
            .iter()
            .filter_map(|sep| probes.rfind(sep))
            .max()
            .ok_or_else(bad)?;
        let start: Probe = probes[..split].parse()?;
        let end: Probe = probes[split + 2..].parse()?;
        let both_usdt = matches!((&start, &end), (Probe::Usdt { .. }, Probe::Usdt { .. }));
        let key = match key {
            Some(key) => key.to_vec(),
            None if both_usdt => vec![Field::Arg(0)],
            None => vec![Field::Tid],
        };
        for probe in [&start, &end] {
            if !probe.has_arguments() && key.iter().any(|f| matches!(f, Field::Arg(_))) {
                return Err(SpecError::NoArguments {
                    span: name.into(),
                    what: "--key",
                    probe: probe.to_string(),
                });
            }
        }
        Ok(SpanSpec {
            name: name.to_string(),
            start,
            end,
            key,
        })
    }
}

/// `--value NAME=PROBE:argN`: the distribution of one argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueSpec {
    /// name in results
    pub name: String,
    /// the probe
    pub probe: Probe,
    /// which argument
    pub arg: u8,
}

impl FromStr for ValueSpec {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || SpecError::Value(s.to_string());
        let (name, rest) = s.split_once('=').ok_or_else(bad)?;
        check_name(name)?;
        let (probe, arg) = rest.rsplit_once(':').ok_or_else(bad)?;
        let Some(Field::Arg(arg)) = Field::parse(arg, false) else {
            return Err(bad());
        };
        let probe: Probe = probe.parse()?;
        if !probe.has_arguments() {
            return Err(bad());
        }
        Ok(ValueSpec {
            name: name.to_string(),
            probe,
            arg,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_specs_parse_with_colons_only_as_separators_at_the_end() {
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
        for bad in [
            "usdt:/bin/x:onlyname",
            "kprobe:do_sys_open",
            "uprobe:/bin/x:",
            "nothing",
        ] {
            assert!(bad.parse::<Probe>().is_err(), "{bad}");
        }
    }

    #[test]
    fn span_keys_default_to_arg0_for_usdt_and_tid_for_functions() {
        let s = SpanSpec::parse("req=usdt:/t:p:start..usdt:/t:p:end", None).unwrap();
        assert_eq!(s.key, [Field::Arg(0)]);
        let s = SpanSpec::parse("call=uprobe:/t:work..uretprobe:/t:work", None).unwrap();
        assert_eq!(s.key, [Field::Tid]);
        assert_eq!(
            s.end,
            Probe::Uretprobe {
                path: "/t".into(),
                symbol: "work".into()
            }
        );
    }

    #[test]
    fn span_paths_may_contain_dot_dot() {
        let s = SpanSpec::parse("x=usdt:../bin/t:p:a..usdt:../bin/t:p:b", None).unwrap();
        assert_eq!(s.start.path(), "../bin/t");
        assert_eq!(s.end.path(), "../bin/t");
    }

    #[test]
    fn an_argument_key_on_a_uretprobe_is_refused_with_the_fix() {
        let err =
            SpanSpec::parse("c=uprobe:/t:f..uretprobe:/t:f", Some(&[Field::Arg(0)])).unwrap_err();
        assert!(err.to_string().contains("use --key tid"), "{err}");
    }

    #[test]
    fn keys_groups_and_values_parse() {
        assert_eq!(parse_key("arg1,tid"), Ok(vec![Field::Arg(1), Field::Tid]));
        assert!(parse_key("comm").is_err());
        assert_eq!(parse_group("comm"), Ok(Field::Comm));
        let v: ValueSpec = "delay=usdt:/t:p:start:arg1".parse().unwrap();
        assert_eq!(v.arg, 1);
        assert!("bad name=usdt:/t:p:s:arg1".parse::<ValueSpec>().is_err());
    }

    #[test]
    fn hostile_probe_specs_are_refused_with_the_reason() {
        let hostile = [
            r#"uprobe:/bin/true:main/{system("id")}"#,
            "uprobe:/bin/true:main{",
            "uprobe:/bin/true:ma;in",
            "uprobe:/bin/true:main\nkprobe:do_exit",
            "uprobe:/bin/true:$x",
            "uprobe:/bin/tr ue:main",
            "uprobe:/bin/tr\"ue:main",
            "uprobe:/bin/tr,ue:main",
            "usdt:/bin/true:p{:n",
            "usdt:/bin/true:p:n;",
            "usdt:/bin/$HOME:p:n",
            "usdt:/bin/x'y:p:n",
            "uretprobe:/bin/true:1main",
        ];
        for spec in hostile {
            let spec = spec.replace("\\n", "\n");
            let e = spec.parse::<Probe>().unwrap_err();
            assert!(matches!(e, SpecError::Unsafe { .. }), "{spec:?} gave {e:?}");
        }
        let long = format!("uprobe:/bin/true:{}", "a".repeat(300));
        assert!(long.parse::<Probe>().is_err());
        let long_path = format!("uprobe:/{}:main", "a".repeat(5000));
        assert!(long_path.parse::<Probe>().is_err());
        // Real specs still parse.
        for ok in [
            "usdt:/usr/lib/x86_64-linux-gnu/libmirserver.so.58:mir_server_wayland:sw_buffer_committed",
            "uprobe:./server:handle_request",
            "uretprobe:/usr/lib/libc++.so.1:_ZN3foo3barEv",
            "uprobe:/opt/app-1.2/bin/x:foo.constprop.0",
        ] {
            assert!(ok.parse::<Probe>().is_ok(), "{ok}");
        }
    }

    #[test]
    fn hostile_span_names_are_refused() {
        for name in ["a{b", "a b", "a;b", "a\nb", "a$", ""] {
            let spec = format!("{name}=uprobe:/bin/true:main..uretprobe:/bin/true:main");
            assert!(SpanSpec::parse(&spec, None).is_err(), "{name:?}");
        }
        let long = format!(
            "{}=uprobe:/bin/true:main..uretprobe:/bin/true:main",
            "n".repeat(65)
        );
        assert!(SpanSpec::parse(&long, None).is_err());
    }
}
