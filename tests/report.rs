//! `latscope plot` and `latscope report` on real results; the HTML report opened in headless
//! Chromium when it is installed (the test command installs it).

use std::path::Path;
use std::process::Command;

use crate::util::{self, run, stderr, write};

fn results(dir: &Path) -> (String, String) {
    (
        util::compare_input(dir, "glmark2-weston.before.client.log", "before.json"),
        util::compare_input(dir, "glmark2-weston.throttled.client.log", "throttled.json"),
    )
}

#[test]
fn the_report_holds_stats_plots_and_the_comparison_of_two_results() {
    let dir = tempfile::tempdir().unwrap();
    let (before, after) = results(dir.path());
    let html = dir.path().join("report.html");
    let out = run(&["report", &before, &after, "-o", html.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert_eq!(
        page.matches("<section>").count(),
        2,
        "commit_to_release and sync_to_done"
    );
    assert_eq!(page.matches("<svg").count(), 4);
    assert!(
        page.contains("<span class=\"verdict mixed\">mixed</span>"),
        "sync_to_done is mixed"
    );
    assert!(page.contains("<span class=\"verdict slower\">slower</span>"));
    // Self-contained: no scripts, nothing loaded (the SVG namespace URI is a name, not a fetch).
    assert!(!page.contains("<script"), "no scripts");
    assert!(
        !page.contains("src=")
            && !page.contains("href=")
            && !page.contains("@import")
            && !page.contains("url("),
        "nothing loaded"
    );
}

#[test]
fn an_event_name_with_a_script_tag_renders_as_text() {
    let dir = tempfile::tempdir().unwrap();
    let evil = util::spans_doc(&[util::series(
        "<script>alert(1)</script>",
        2,
        [1000, 1000, 2000, 2000],
        [0, 0],
        &[(1000, 1023, 1), (2000, 2047, 1)],
    )]);
    let input = write(dir.path(), "<evil>.json", evil);
    let html = dir.path().join("report.html");
    let out = run(&[
        "report",
        input.to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(!page.contains("<script>alert(1)</script>"));
    assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(page.contains("&lt;evil&gt;.json"));
}

#[test]
fn plots_are_written_as_svg_with_both_results_overlaid() {
    let dir = tempfile::tempdir().unwrap();
    let (before, after) = results(dir.path());
    for kind in ["histogram", "percentiles"] {
        let svg = dir.path().join(format!("{kind}.svg"));
        let out = run(&[
            "plot",
            &before,
            &after,
            "--kind",
            kind,
            "--span",
            "commit_to_release",
            "-o",
            svg.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(
            text.starts_with("<svg") && text.contains("commit_to_release [client]"),
            "{kind}"
        );
        assert!(
            text.contains("before.json") && text.contains("throttled.json"),
            "{kind}: legend"
        );
    }
    let out = run(&["plot", &before, "--span", "nope", "-o", "/dev/null"]);
    assert!(stderr(&out).contains("no span or command named 'nope'"));
}

/// Opens the report in headless Chromium inside a harness page that measures every SVG
/// (the report itself has no scripts), and takes a screenshot.
#[test]
fn the_report_renders_its_plots_in_headless_chromium() {
    let chromium = ["chromium", "chromium-browser"].into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let Some(chromium) = chromium else {
        assert!(
            std::env::var_os("LATSCOPE_REQUIRE_STACK").is_none(),
            "chromium is missing but LATSCOPE_REQUIRE_STACK is set"
        );
        eprintln!("skipping: chromium is not installed");
        return;
    };
    let _heavy = util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let (before, after) = results(dir.path());
    let html = dir.path().join("report.html");
    assert!(
        run(&["report", &before, &after, "-o", html.to_str().unwrap()])
            .status
            .success()
    );
    let harness = write(
        dir.path(),
        "harness.html",
        "<!DOCTYPE html><html><body><iframe id=f src=\"report.html\" width=1200 height=3000></iframe><pre id=out>pending</pre><script>\
         document.getElementById('f').onload=function(){var d=this.contentDocument,s=d.querySelectorAll('svg'),r=[];\
         for(var i=0;i<s.length;i++){var b=s[i].getBoundingClientRect();r.push(Math.round(b.width)+'x'+Math.round(b.height));}\
         document.getElementById('out').textContent='svgs:'+r.join(',')+';text:'+d.body.innerText.length;};</script>\
         <iframe id=g src=\"evil.html\"></iframe><pre id=evil>pending</pre><script>document.getElementById('g').onload=function(){\
         var d=this.contentDocument;document.getElementById('evil').textContent='scripts:'+d.querySelectorAll('script').length+\
         ';shown:'+(d.body.innerText.indexOf('<script>alert(1)</script>')>=0);};</script></body></html>",
    );
    let profile = dir.path().join("profile");
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--allow-file-access-from-files",
        "--virtual-time-budget=5000",
    ];
    let out = Command::new(chromium)
        .args(common)
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", harness.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let measured = dom
        .split("svgs:")
        .nth(1)
        .and_then(|r| r.split(';').next())
        .unwrap_or_else(|| panic!("no measurement in {dom}"));
    let sizes: Vec<&str> = measured.split(',').collect();
    assert_eq!(sizes.len(), 4, "{measured}");
    assert!(
        sizes
            .iter()
            .all(|s| !s.starts_with("0x") && !s.ends_with("x0")),
        "an SVG rendered with zero size: {measured}"
    );
    let shot = dir.path().join("report.png");
    let out = Command::new(chromium)
        .args(common)
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1200,1600")
        .arg(format!("file://{}", html.display()))
        .output()
        .unwrap();
    assert!(shot.exists(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        std::fs::metadata(&shot).unwrap().len() > 20_000,
        "the screenshot looks empty"
    );
}

/// How Chromium lays out the demo's report in an iframe `width` px wide: per section, its id,
/// its SVGs' rendered sizes, whether it says what did not run, and whether any SVG is wider
/// than its section.
const DEMO_HARNESS: &str = "<!DOCTYPE html><html><body><iframe id=f src=\"demo.html\" width=WIDTH height=4000></iframe><pre id=out>pending</pre><script>\
    document.getElementById('f').onload=function(){var d=this.contentDocument,r=[];\
    d.querySelectorAll('section.part').forEach(function(s){var w=s.getBoundingClientRect().width,v=[],cut=0;\
    s.querySelectorAll('svg').forEach(function(g){var b=g.getBoundingClientRect();v.push(Math.round(b.width)+'x'+Math.round(b.height));if(b.width>w+1)cut++;});\
    r.push(s.id+'='+v.join('/')+(s.querySelector('.missing')?' missing':'')+(s.querySelector('.cmd')?' cmd':'')+(cut?' cut':''));});\
    document.getElementById('out').textContent='parts:'+r.join(';')+':end';};</script></body></html>";

#[test]
fn the_demos_report_holds_every_part_and_chromium_draws_each_plot_at_800_to_1600_px() {
    let Some(chromium) = ["chromium", "chromium-browser"].into_iter().find(|c| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    }) else {
        assert!(
            std::env::var_os("LATSCOPE_REQUIRE_STACK").is_none(),
            "chromium is missing but LATSCOPE_REQUIRE_STACK is set"
        );
        eprintln!("skipping: chromium is not installed");
        return;
    };
    let _heavy = util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("demo.html");
    let out = util::latscope()
        .args(["demo", "--report", html.to_str().unwrap()])
        .env("XDG_RUNTIME_DIR", dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let page = std::fs::read_to_string(&html).unwrap();
    let profile = dir.path().join("profile");
    let chrome = |args: &[String]| {
        Command::new(chromium)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
            ])
            .args([
                "--disable-background-networking",
                "--disable-component-update",
            ])
            .args([
                "--allow-file-access-from-files",
                "--virtual-time-budget=5000",
            ])
            .arg(format!("--user-data-dir={}", profile.display()))
            .args(args)
            .output()
            .unwrap()
    };
    for width in [800, 1200, 1600] {
        let harness = write(
            dir.path(),
            "harness.html",
            DEMO_HARNESS.replace("WIDTH", &width.to_string()),
        );
        let out = chrome(&["--dump-dom".into(), format!("file://{}", harness.display())]);
        let dom = String::from_utf8_lossy(&out.stdout);
        let parts = dom
            .split("parts:")
            .nth(1)
            .and_then(|r| r.split(":end").next())
            .unwrap_or_else(|| panic!("no layout in {dom}"));
        let parts: Vec<&str> = parts.split(';').collect();
        let ids: Vec<&str> = parts.iter().map(|p| p.split('=').next().unwrap()).collect();
        assert_eq!(ids, ["ipc", "x11", "wayland-lab", "log"], "{parts:?}");
        for part in &parts {
            let (id, rest) = part.split_once('=').unwrap();
            assert!(
                rest.contains(" cmd"),
                "{id} has no command to reproduce it: {part}"
            );
            assert!(
                !rest.contains(" cut"),
                "{id}: a plot is wider than the page at {width} px"
            );
            let sizes: Vec<&str> = rest
                .split(' ')
                .next()
                .unwrap()
                .split('/')
                .filter(|s| !s.is_empty())
                .collect();
            assert!(
                sizes
                    .iter()
                    .all(|s| !s.starts_with("0x") && !s.ends_with("x0")),
                "{id}: an SVG drawn with zero size at {width} px: {part}"
            );
            match id {
                // Measured here whatever is installed: a chart, or a histogram and a percentile
                // plot per span.
                "ipc" => assert_eq!(sizes.len(), 1, "{part}"),
                "log" => assert!(sizes.len() >= 2 && sizes.len().is_multiple_of(2), "{part}"),
                // The labs: a chart when they ran, else what to install.
                _ => {
                    assert!(sizes.len() == 1 || rest.contains(" missing"), "{part}");
                    if rest.contains(" missing") {
                        assert!(
                            page.contains("apt-get install"),
                            "{id} says not what to install"
                        );
                    }
                }
            }
        }
        if std::env::var_os("LATSCOPE_REQUIRE_STACK").is_some() {
            for id in ["x11", "wayland-lab"] {
                assert!(
                    !parts
                        .iter()
                        .any(|p| p.starts_with(id) && p.contains(" missing")),
                    "{id} did not run: {parts:?}"
                );
            }
        }
    }
    // The picture, kept beside the test binaries for a person to look at.
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("demo-report.png");
    let out = chrome(&[
        format!("--screenshot={}", shot.display()),
        "--window-size=1200,5000".into(),
        format!("file://{}", html.display()),
    ]);
    assert!(shot.exists(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        std::fs::metadata(&shot).unwrap().len() > 50_000,
        "the screenshot looks empty"
    );
    eprintln!("the demo's report: {}", shot.display());
}
