//! `latscope probes`: list the USDT probes of files or of a running process.

use anyhow::{Context, Result, bail};

use crate::cli::{Format, ProbesArgs};
use latscope::doc::probes::{ProbeFile, ProbesDoc};
use latscope::probe::{UsdtProbe, mapped_objects, read_usdt_probes};

/// Runs `latscope probes`.
pub fn run(args: &ProbesArgs) -> Result<()> {
    let mut files: Vec<String> = args.files.iter().map(|p| p.display().to_string()).collect();
    if let Some(pid) = args.pid {
        files.extend(mapped_objects(pid)?);
    }
    if files.is_empty() {
        bail!("nothing to list: give an executable or library, or --pid PID");
    }
    let mut listing = Vec::new();
    for file in &files {
        let probes = match read_usdt_probes(file) {
            Ok(probes) => probes,
            // A process maps files that are not ELF objects (fonts, locale archives): skip them.
            Err(_)
                if args.pid.is_some()
                    && !args.files.iter().any(|f| f.display().to_string() == *file) =>
            {
                continue;
            }
            Err(e) => return Err(e).context("listing probes"),
        };
        if !probes.is_empty() || args.pid.is_none() {
            listing.push((file.clone(), probes));
        }
    }
    if listing.is_empty() {
        eprintln!(
            "latscope: no USDT probes in the {} objects mapped by process {}",
            files.len(),
            args.pid.unwrap_or(0)
        );
    }
    let text = match args.out.get() {
        Format::Text => render_text(&listing),
        Format::Json => render_json(listing),
        Format::Markdown | Format::Csv => crate::commands::unsupported("probes", args.out.get()),
    };
    crate::commands::print(&text)
}

fn render_text(listing: &[(String, Vec<UsdtProbe>)]) -> String {
    let mut out = String::new();
    for (file, probes) in listing {
        out.push_str(&format!("{file}: {} USDT probes\n", probes.len()));
        for p in probes {
            let semaphore = if p.semaphore.is_some() {
                "  [semaphore]"
            } else {
                ""
            };
            let args = if p.arguments.is_empty() {
                "no arguments".to_string()
            } else {
                p.arguments.join(" ")
            };
            out.push_str(&format!(
                "  usdt:{file}:{}:{}  ({args}){semaphore}\n",
                p.provider, p.name
            ));
        }
    }
    out
}

fn render_json(listing: Vec<(String, Vec<UsdtProbe>)>) -> String {
    let files = listing
        .into_iter()
        .map(|(path, probes)| ProbeFile { path, probes })
        .collect();
    latscope::doc::to_json(&ProbesDoc::new(files), false)
}
