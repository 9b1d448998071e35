//! `latscope compare BEFORE AFTER`.

use anyhow::{Context, Result, bail};

use crate::cli::{CompareArgs, Format};
use latscope::compare::{self, pair_by_position};
use latscope::doc::{self, Loaded};
use latscope::report::Render;
use latscope::stats::change::Rule;

/// Reads any saved result.
pub fn load(path: &std::path::Path) -> Result<Loaded> {
    let bytes = latscope::files::read_result(path, latscope::files::MAX_RESULT_BYTES)
        .with_context(|| format!("reading {}", path.display()))?;
    let text = String::from_utf8(bytes).map_err(|_| {
        anyhow::anyhow!(
            "{}: not a result (not UTF-8 text: latscope, bpftrace and .hlog results are text)",
            path.display()
        )
    })?;
    Ok(doc::load(&path.display().to_string(), &text)?)
}

/// Compares two loaded results of one kind (bench commands paired by position when they share
/// no name, with a note).
pub fn comparison(
    (b_path, before): (&str, &Loaded),
    (a_path, after): (&str, &Loaded),
    noise: f64,
) -> Result<doc::compare::CompareDoc> {
    if before.kind != after.kind {
        bail!(
            "cannot compare a {} result with a {} result",
            before.kind,
            after.kind
        );
    }
    let mut after_items = after.items.clone();
    let note = (before.kind == "bench")
        .then(|| pair_by_position(&before.items, &mut after_items))
        .flatten();
    let rule = Rule {
        noise,
        ..Rule::default()
    };
    let mut c = compare::compare(b_path, a_path, &before.items, &after_items, rule);
    c.notes.extend(note);
    Ok(c)
}

/// Runs `latscope compare`.
pub fn run(args: &CompareArgs) -> Result<()> {
    if args.out.get() == Format::Csv {
        crate::commands::unsupported("compare", args.out.get());
    }
    let (b, a) = (
        args.before.display().to_string(),
        args.after.display().to_string(),
    );
    let c = comparison(
        (&b, &load(&args.before)?),
        (&a, &load(&args.after)?),
        args.noise.get(),
    )?;
    for note in &c.notes {
        eprintln!("latscope: {note}");
    }
    let unit = args.unit.unit();
    let text = match args.out.get() {
        Format::Text => c.text(unit),
        Format::Json => doc::to_json(&c, false),
        Format::Markdown => c.markdown(unit),
        Format::Csv => crate::commands::unsupported("compare", args.out.get()),
    };
    crate::commands::print(&text)
}
