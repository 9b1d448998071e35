//! The one place for what every renderer needs: choosing a unit for a duration, and escaping
//! text for Markdown tables, HTML, CSV and the terminal. Renderers call these instead of their own copies, so
//! a fix to escaping (an input's `|` breaking a table, a `<script>` in an HTML report) is made
//! once.

use crate::stats::Unit;

/// A duration with a unit that fits it and three significant digits: `31 ns`, `4.57 µs`,
/// `12.3 ms`, `2.00 s`.
pub fn human(ns: u64) -> String {
    if ns < 1_000 {
        return format!("{ns} ns");
    }
    human_f(ns as f64)
}

/// The largest unit in which `ns` is at least 1 (`Ns` below a microsecond): the unit every
/// renderer that picks one per value uses.
pub fn unit_for(ns: f64) -> Unit {
    [Unit::S, Unit::Ms, Unit::Us]
        .into_iter()
        .find(|u| ns.abs() >= u.nanos() as f64)
        .unwrap_or(Unit::Ns)
}

/// [`human`] for a fractional number of nanoseconds (a median of runs, a mean).
pub fn human_f(ns: f64) -> String {
    if !ns.is_finite() {
        return "–".to_string();
    }
    let unit = unit_for(ns);
    let value = unit.from_nanos(ns);
    let decimals = match value.abs() {
        v if v < 10.0 && unit != Unit::Ns => 2,
        v if v < 100.0 && unit != Unit::Ns => 1,
        _ => 0,
    };
    format!("{value:.decimals$} {}", unit.symbol())
}

/// Text for a Markdown table cell: `|` escaped, line breaks folded, `<`/`>` as entities (so
/// no input becomes markup where Markdown is rendered to HTML).
pub fn markdown_cell(text: &str) -> String {
    text.replace('|', "\\|")
        .replace(['\n', '\r'], " ")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Text as inline code in a Markdown table cell (a command line): backticks cannot be escaped
/// inside a code span, so they become `'`.
pub fn markdown_code(text: &str) -> String {
    format!("`{}`", markdown_cell(&text.replace('`', "'")))
}

/// Escapes text for HTML element content and attribute values.
pub fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Text for a terminal: control characters (an escape sequence that recolours or clears the
/// screen, a line break that forges a line of the report) written as Rust escapes, `\u{1b}`,
/// `\n`; everything else as it is.
pub fn printable(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// A CSV field (RFC 4180): quoted, with inner quotes doubled.
pub fn csv_field(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_get_a_unit_that_fits() {
        assert_eq!(human(31), "31 ns");
        assert_eq!(human(4_567), "4.57 µs");
        assert_eq!(human(45_670), "45.7 µs");
        assert_eq!(human(456_700), "457 µs");
        assert_eq!(human(12_300_000), "12.3 ms");
        assert_eq!(human(2_000_000_000), "2.00 s");
        assert_eq!(human_f(999.4), "999 ns");
        assert_eq!(human_f(f64::NAN), "–");
    }

    #[test]
    fn table_cells_and_pages_cannot_be_broken_by_input() {
        assert_eq!(markdown_cell("a|b\n<i>"), "a\\|b &lt;i&gt;");
        assert_eq!(markdown_code("echo `x`|y"), "`echo 'x'\\|y`");
        assert_eq!(
            html("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;"
        );
        assert_eq!(csv_field("say \"hi\", bye"), "\"say \"\"hi\"\", bye\"");
        assert_eq!(
            printable("a\x1b[31mred\nx\t\u{7f}\u{9b}é"),
            "a\\u{1b}[31mred\\nx\\t\\u{7f}\\u{9b}é"
        );
    }
}
