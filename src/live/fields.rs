//! What a field name means at a probe, and the bpftrace expression that reads it.
//!
//! A name is resolved at each probe that uses it, in this order: a field of the tracepoint's
//! tracefs `format` (so sched_wakeup's `pid` is the woken task's, as `latscope spans` reads it
//! from perf's text), then the task's `comm`, `pid`, `tid`, `cpu`, then `argN` (USDT, uprobe,
//! kprobe) and `retval` (return probes). Types come from the format: `char[N]` and
//! `__data_loc char[]` are text, everything else an integer. Filters, keys and groups are
//! checked against these types before bpftrace starts, and every value that reaches the
//! program is validated (integers parsed, text restricted to printable ASCII without quotes or
//! backslashes), never escaped.

use std::collections::HashMap;

use super::spec::{Probe, SpecError};
use crate::rule::{Filter, Op};

/// The type of a tracepoint field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    /// an integer or pointer
    Int,
    /// `char NAME[N]`: text of at most N − 1 bytes
    Chars(usize),
    /// `__data_loc char[] NAME`: text of any length, read with `str()`
    DynStr,
    /// an array of something other than `char`: not usable here
    Other,
}

/// One field of a tracepoint's `format` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TpField {
    /// its name
    pub name: String,
    /// its type
    pub ty: FieldType,
}

/// Parses a tracefs `format` file into its fields (the `common_` ones left out).
pub fn parse_format(text: &str) -> Vec<TpField> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("field:"))
        .filter_map(|decl| {
            let decl = decl.split(';').next()?.trim();
            let (ty, name) = decl.rsplit_once(' ')?;
            let (name, array) = match name.split_once('[') {
                Some((n, len)) => (n, Some(len.trim_end_matches(']'))),
                None => (name, None),
            };
            if name.starts_with("common_") {
                return None;
            }
            let is_char = ty.ends_with("char") && !ty.contains('*');
            let ty = match (ty.starts_with("__data_loc"), array) {
                (true, _) if is_char || ty.ends_with("char[]") => FieldType::DynStr,
                (true, _) => FieldType::Other,
                (false, Some(n)) if is_char => FieldType::Chars(n.parse().unwrap_or(0)),
                (false, Some(_)) => FieldType::Other,
                (false, None) => FieldType::Int,
            };
            Some(TpField {
                name: name.to_string(),
                ty,
            })
        })
        .collect()
}

/// The fields of the tracepoints a plan uses, read from tracefs (`None`: not known, as with
/// `--print-program` where tracefs cannot be read: names are then taken as integer fields,
/// unchecked, and the program says so).
pub type Formats = HashMap<(String, String), Option<Vec<TpField>>>;

/// A field resolved at a probe: its bpftrace expression and whether it is text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// the expression (`args->next_pid`, `str(args->driver)`, `comm`, `arg1`)
    pub expr: String,
    /// text (compared as a string) rather than an integer
    pub text: bool,
    /// the most bytes the text holds (`char[16]`: 15), if bounded
    pub max_len: Option<usize>,
}

fn builtin(name: &str) -> Option<Resolved> {
    let int = |e: &str| Resolved {
        expr: e.into(),
        text: false,
        max_len: None,
    };
    match name {
        "pid" | "tid" | "cpu" => Some(int(name)),
        "comm" => Some(Resolved {
            expr: "comm".into(),
            text: true,
            max_len: Some(15),
        }),
        _ => None,
    }
}

fn field_error(probe: &Probe, name: &str, known: &[String]) -> SpecError {
    let near = crate::probe::nearest(name, known.iter().map(String::as_str));
    let shown: Vec<&str> = near.into_iter().take(6).collect();
    SpecError::Field(format!(
        "{probe} has no field '{name}'; it has: {} (nearest: {})",
        known.join(", "),
        if shown.is_empty() {
            "none".to_string()
        } else {
            shown.join(", ")
        }
    ))
}

/// A C identifier: what a field name in the program may be.
fn is_c_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 64
}

/// Resolves `name` at `probe`.
pub fn resolve(name: &str, probe: &Probe, formats: &Formats) -> Result<Resolved, SpecError> {
    if !is_c_identifier(name) {
        return Err(SpecError::Field(format!(
            "'{name}' is not a field name at {probe} (a letter or _, then letters, digits, _)"
        )));
    }
    if let Probe::Tracepoint { subsys, name: tp } = probe {
        let fields = formats
            .get(&(subsys.clone(), tp.clone()))
            .cloned()
            .flatten();
        let Some(fields) = fields else {
            // Unknown format (--print-program without tracefs): a field, unchecked.
            return Ok(builtin(name).unwrap_or(Resolved {
                expr: format!("args->{name}"),
                text: false,
                max_len: None,
            }));
        };
        if let Some(f) = fields.iter().find(|f| f.name == name) {
            return match f.ty {
                FieldType::Int => Ok(Resolved {
                    expr: format!("args->{name}"),
                    text: false,
                    max_len: None,
                }),
                FieldType::Chars(n) => Ok(Resolved {
                    expr: format!("args->{name}"),
                    text: true,
                    max_len: Some(n.saturating_sub(1)),
                }),
                FieldType::DynStr => Ok(Resolved {
                    expr: format!("str(args->{name})"),
                    text: true,
                    max_len: None,
                }),
                FieldType::Other => Err(SpecError::Field(format!(
                    "{probe}: field '{name}' is an array, which latscope cannot compare, key or count"
                ))),
            };
        }
        if let Some(b) = builtin(name) {
            return Ok(b);
        }
        let mut known: Vec<String> = fields.iter().map(|f| f.name.clone()).collect();
        // A tracepoint's own `comm` or `pid` (sched_wakeup's) shadows the task's: named once.
        for task in ["comm", "pid", "tid", "cpu"] {
            if !known.iter().any(|k| k == task) {
                known.push(task.to_string());
            }
        }
        return Err(field_error(probe, name, &known));
    }
    if let Some(b) = builtin(name) {
        return Ok(b);
    }
    if let Some(n) = name.strip_prefix("arg").and_then(|n| n.parse::<u8>().ok())
        && n < 12
        && name == format!("arg{n}")
    {
        if probe.has_arguments() {
            return Ok(Resolved {
                expr: name.into(),
                text: false,
                max_len: None,
            });
        }
        return Err(SpecError::Field(format!(
            "{probe} has no arguments ({}); use {}",
            if probe.has_retval() {
                "a return probe has only retval"
            } else {
                "it is a tracepoint"
            },
            if probe.has_retval() {
                "retval, or --key tid"
            } else {
                "its fields"
            }
        )));
    }
    if name == "retval" && probe.has_retval() {
        return Ok(Resolved {
            expr: "retval".into(),
            text: false,
            max_len: None,
        });
    }
    let mut known = vec!["comm", "pid", "tid", "cpu"];
    if probe.has_arguments() {
        known.push("arg0..arg11");
    }
    if probe.has_retval() {
        known.push("retval");
    }
    let known: Vec<String> = known.into_iter().map(String::from).collect();
    Err(field_error(probe, name, &known))
}

/// The longest text value in a filter.
const MAX_TEXT: usize = 255;

/// A text value as a bpftrace string literal: printable ASCII without `"` or `\`.
fn text_literal(filter: &Filter, spec: &str) -> Result<String, SpecError> {
    let v = &filter.value;
    let ok = v.len() <= MAX_TEXT
        && v.bytes()
            .all(|b| (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\');
    if ok {
        Ok(format!("\"{v}\""))
    } else {
        Err(SpecError::Unsafe {
            spec: spec.to_string(),
            why: format!(
                "the value of '{filter}' must be printable ASCII without quotes or backslashes, at most {MAX_TEXT} bytes"
            ),
        })
    }
}

/// A decimal or `0x` hexadecimal integer, possibly negative.
fn integer(value: &str) -> Option<String> {
    let (neg, digits) = match value.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, value),
    };
    let n = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(hex, 16).ok()?,
        None => digits.parse::<u64>().ok()?,
    };
    if neg {
        // i64::MIN's magnitude is one more than i64::MAX: a valid value too.
        (n <= i64::MIN.unsigned_abs()).then(|| format!("-{n}"))
    } else {
        Some(n.to_string())
    }
}

/// The bpftrace condition of `filter` at `probe`.
pub fn filter_expr(
    filter: &Filter,
    probe: &Probe,
    formats: &Formats,
    spec: &str,
) -> Result<String, SpecError> {
    let field = resolve(&filter.field, probe, formats)?;
    if field.text {
        let literal = text_literal(filter, spec)?;
        if let Some(max) = field.max_len
            && filter.value.len() > max
            && filter.op != Op::Ne
        {
            return Err(SpecError::Field(format!(
                "'{filter}' can never match: {} holds at most {max} bytes at {probe} (the kernel truncates it)",
                filter.field
            )));
        }
        return Ok(match filter.op {
            Op::Eq => format!("{} == {literal}", field.expr),
            Op::Ne => format!("{} != {literal}", field.expr),
            Op::Prefix => format!(
                "strncmp({}, {literal}, {}) == 0",
                field.expr,
                filter.value.len()
            ),
        });
    }
    let Some(n) = integer(&filter.value) else {
        return Err(SpecError::Field(format!(
            "'{filter}': {} is an integer at {probe}, and '{}' is not one (decimal or 0x hex)",
            filter.field, filter.value
        )));
    };
    match filter.op {
        Op::Eq => Ok(format!("{} == {n}", field.expr)),
        Op::Ne => Ok(format!("{} != {n}", field.expr)),
        Op::Prefix => Err(SpecError::Field(format!(
            "'{filter}': ^= compares text, and {} is an integer at {probe}; use ==",
            filter.field
        ))),
    }
}

/// The expression of a key field: integers widened to 64 bits so that a start and an end
/// with different field sizes agree.
pub fn key_expr(field: &Resolved) -> String {
    if field.text {
        field.expr.clone()
    } else {
        format!("(uint64){}", field.expr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHED_SWITCH: &str = "name: sched_switch
ID: 372
format:
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;

\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;
\tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;
\tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;
\tfield:__data_loc char[] driver;\toffset:8;\tsize:4;\tsigned:0;
\tfield:unsigned long ips[4];\toffset:8;\tsize:32;\tsigned:0;

print fmt: \"prev_comm=%s\", REC->prev_comm
";

    fn formats() -> Formats {
        let mut f = Formats::new();
        f.insert(
            ("sched".into(), "sched_switch".into()),
            Some(parse_format(SCHED_SWITCH)),
        );
        f
    }

    fn tp() -> Probe {
        "tracepoint:sched:sched_switch".parse().unwrap()
    }

    #[test]
    fn a_format_file_gives_each_field_its_type() {
        let fields = parse_format(SCHED_SWITCH);
        let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "prev_comm",
                "prev_pid",
                "prev_state",
                "next_comm",
                "next_pid",
                "driver",
                "ips"
            ]
        );
        assert_eq!(fields[0].ty, FieldType::Chars(16));
        assert_eq!(fields[1].ty, FieldType::Int);
        assert_eq!(fields[5].ty, FieldType::DynStr);
        assert_eq!(fields[6].ty, FieldType::Other);
    }

    #[test]
    fn tracepoint_fields_win_over_the_tasks_and_unknown_ones_name_the_fields() {
        let f = formats();
        assert_eq!(
            resolve("next_pid", &tp(), &f).unwrap().expr,
            "args->next_pid"
        );
        assert_eq!(
            resolve("driver", &tp(), &f).unwrap().expr,
            "str(args->driver)"
        );
        assert_eq!(resolve("comm", &tp(), &f).unwrap().expr, "comm");
        let e = resolve("next_pdi", &tp(), &f).unwrap_err().to_string();
        assert!(
            e.contains("has no field 'next_pdi'") && e.contains("nearest: next_pid"),
            "{e}"
        );
        assert!(resolve("ips", &tp(), &f).is_err());
        // Without a format (--print-program), a name is a field only if it is an identifier.
        assert!(resolve("pid-1", &tp(), &Formats::new()).is_err());
        assert!(resolve("arg0", &tp(), &f).is_err());
    }

    #[test]
    fn a_tracepoint_with_its_own_comm_and_pid_names_each_field_once() {
        let wakeup = "format:
\tfield:char comm[16];\toffset:8;\tsize:16;\tsigned:0;
\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;
\tfield:int prio;\toffset:28;\tsize:4;\tsigned:1;
";
        let mut f = Formats::new();
        f.insert(
            ("sched".into(), "sched_wakeup".into()),
            Some(parse_format(wakeup)),
        );
        let probe: Probe = "tracepoint:sched:sched_wakeup".parse().unwrap();
        let e = resolve("nope", &probe, &f).unwrap_err().to_string();
        assert!(e.contains("it has: comm, pid, prio, tid, cpu ("), "{e}");
    }

    #[test]
    fn arguments_and_return_values_exist_only_where_the_probe_has_them() {
        let f = Formats::new();
        let up: Probe = "uprobe:/bin/x:f".parse().unwrap();
        let ret: Probe = "kretprobe:vfs_read".parse().unwrap();
        assert_eq!(resolve("arg3", &up, &f).unwrap().expr, "arg3");
        assert!(resolve("arg12", &up, &f).is_err());
        assert!(resolve("retval", &up, &f).is_err());
        assert_eq!(resolve("retval", &ret, &f).unwrap().expr, "retval");
        let e = resolve("arg0", &ret, &f).unwrap_err().to_string();
        assert!(e.contains("only retval"), "{e}");
    }

    #[test]
    fn filters_compile_by_type_and_refuse_what_cannot_match() {
        let f = formats();
        let filter = |s: &str| Filter::parse(s, s).unwrap();
        let c = |s: &str| filter_expr(&filter(s), &tp(), &f, s);
        assert_eq!(
            c("next_comm==myapp").unwrap(),
            "args->next_comm == \"myapp\""
        );
        assert_eq!(
            c("prev_comm^=kworker/").unwrap(),
            "strncmp(args->prev_comm, \"kworker/\", 8) == 0"
        );
        assert_eq!(c("next_pid!=0x10").unwrap(), "args->next_pid != 16");
        assert_eq!(c("prev_state==-1").unwrap(), "args->prev_state == -1");
        assert_eq!(
            c("prev_state==-9223372036854775808").unwrap(),
            "args->prev_state == -9223372036854775808"
        );
        assert!(c("prev_state==-9223372036854775809").is_err());
        assert_eq!(
            c("prev_state==0xffffffffffffffff").unwrap(),
            "args->prev_state == 18446744073709551615"
        );
        assert!(
            c("next_pid==abc")
                .unwrap_err()
                .to_string()
                .contains("integer")
        );
        assert!(
            c("next_pid^=1")
                .unwrap_err()
                .to_string()
                .contains("^= compares text")
        );
        assert!(
            c("next_comm==a_name_of_sixteen_")
                .unwrap_err()
                .to_string()
                .contains("never match")
        );
        // Quoted values with spaces reach the program; quotes and backslashes inside never do.
        assert_eq!(
            c("next_comm=='my app'").unwrap(),
            "args->next_comm == \"my app\""
        );
        assert!(matches!(
            c("next_comm=='a\"b'"),
            Err(SpecError::Unsafe { .. })
        ));
        assert!(matches!(
            c("next_comm==a\\b"),
            Err(SpecError::Unsafe { .. })
        ));
    }

    #[test]
    fn keys_are_widened_integers_or_text() {
        let f = formats();
        let pid = resolve("next_pid", &tp(), &f).unwrap();
        assert_eq!(key_expr(&pid), "(uint64)args->next_pid");
        let comm = resolve("next_comm", &tp(), &f).unwrap();
        assert_eq!(key_expr(&comm), "args->next_comm");
    }
}
