//! The fleet features against the real engines: Debian's Prometheus 2.42 scraping
//! `latscope live --serve` (native histograms over protobuf), and the HTTP side's failures.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::live::{live_available, probe, saved, target};
use crate::util::{self, stderr};

/// A child process killed (and reaped) on every exit path of a test.
pub(crate) struct Guard(pub(crate) Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Asks the kernel to kill the child when the test process dies (a panic that skips Drop).
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    unsafe extern "C" {
        fn prctl(option: i32, arg2: u64, arg3: u64, arg4: u64, arg5: u64) -> i32;
    }
    // SAFETY: prctl(PR_SET_PDEATHSIG, SIGKILL) is async-signal-safe and touches no memory.
    unsafe {
        cmd.pre_exec(|| {
            prctl(1, 9, 0, 0, 0);
            Ok(())
        });
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A plain HTTP/1.0 GET on loopback: status line and body.
pub(crate) fn http_get(port: u16, path: &str, accept: &str) -> (String, Vec<u8>) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nAccept: {accept}\r\n\r\n"
    )
    .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("an HTTP response");
    let head = String::from_utf8_lossy(&response[..split]).to_string();
    (head, response[split + 4..].to_vec())
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// One instant PromQL query: the value of the first result, if any.
fn promql(port: u16, query: &str) -> Option<f64> {
    let (head, body) = http_get(
        port,
        &format!("/api/v1/query?query={}", url_encode(query)),
        "application/json",
    );
    assert!(
        head.contains(" 200 "),
        "{head}: {}",
        String::from_utf8_lossy(&body)
    );
    let doc: Value = serde_json::from_slice(&body).expect("JSON from Prometheus");
    doc["data"]["result"][0]["value"][1]
        .as_str()
        .and_then(|v| v.parse().ok())
}

/// Starts `latscope live --serve 127.0.0.1:0` on the target started with `target_args` (traced
/// from its first instruction, so every request counts); returns it and the port it serves on.
pub(crate) fn serve_live(
    t: &Path,
    target_args: &[&str],
    save: &Path,
    extra: &[&str],
) -> (Guard, u16) {
    let span = format!(
        "req={}..{}",
        probe(t, "request_start"),
        probe(t, "request_end")
    );
    let mut cmd = util::latscope();
    cmd.args(["live", "-q", "--interval", "1", "--serve", "127.0.0.1:0"])
        .args(["--save", save.to_str().unwrap()])
        .args(["--span", &span, "--rate", &probe(t, "tick")])
        .args(extra)
        .arg("--")
        .arg(t)
        .args(target_args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    die_with_parent(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut port = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(rest) = line.strip_prefix("latscope: serving metrics on http://127.0.0.1:") {
            port = rest.trim_end_matches("/metrics").parse().ok();
            break;
        }
    }
    // Keep draining stderr so that latscope never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (
        Guard(child),
        port.expect("latscope printed the address it serves on"),
    )
}

/// Prometheus on loopback, scraping `target_port` every second, its storage in `dir`; with
/// native histograms (protobuf) when `native`, else classic ones (OpenMetrics text).
fn start_prometheus(dir: &Path, target_port: u16, native: bool) -> (Guard, u16) {
    let port = free_port();
    let dir = dir.join(if native { "native" } else { "classic" });
    std::fs::create_dir(&dir).unwrap();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: latscope\n    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
        ),
    )
    .unwrap();
    let mut cmd = Command::new("prometheus");
    cmd.arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .args(native.then_some("--enable-feature=native-histograms"))
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    die_with_parent(&mut cmd);
    (Guard(cmd.spawn().expect("prometheus")), port)
}

fn prometheus_available() -> bool {
    live_available() && util::commands_available(&["prometheus"], "Prometheus (Debian prometheus)")
}

#[test]
fn promql_quantiles_of_served_native_histograms_match_latscopes_own_percentiles() {
    if !prometheus_available() {
        return;
    }
    let _heavy = util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let t = target(dir.path());
    let save = dir.path().join("live.json");
    // 600 requests in about 1.5 s, then 10 s of quiet in which every scrape sees the totals.
    let (mut latscope, serve_port) = serve_live(
        &t,
        &["600", "2", "0", "10000"],
        &save,
        &["--label", "host=lab1"],
    );
    let (_prometheus, prom_port) = start_prometheus(dir.path(), serve_port, true);
    let (_classic, classic_port) = start_prometheus(dir.path(), serve_port, false);
    let series = r#"latscope_span_nanoseconds{span="req",host="lab1",job="latscope"}"#;
    let classic_count = r#"latscope_span_nanoseconds_count{span="req",host="lab1"}"#;
    let started = Instant::now();
    let (mut count, mut counted) = (None, None);
    // Both servers must have scraped the totals: the classic one, started second, was still
    // without a sample of them in one CI run when the native one had them.
    while started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(500));
        // Prometheus may still be starting: a refused connection is retried.
        let up = |port| TcpStream::connect(("127.0.0.1", port)).is_ok();
        if !up(prom_port) || !up(classic_port) {
            continue;
        }
        count = promql(prom_port, &format!("histogram_count({series})"));
        counted = promql(classic_port, classic_count);
        if count == Some(600.0) && counted == Some(600.0) {
            break;
        }
    }
    assert_eq!(count, Some(600.0), "Prometheus never saw all 600 spans");
    assert_eq!(
        counted,
        Some(600.0),
        "the classic Prometheus never saw all 600 spans"
    );
    let p50 = promql(prom_port, &format!("histogram_quantile(0.5, {series})")).unwrap();
    let p99 = promql(prom_port, &format!("histogram_quantile(0.99, {series})")).unwrap();
    let ticks = promql(prom_port, r#"latscope_rate_events_total{host="lab1"}"#);
    // A Prometheus without native histograms got OpenMetrics text: classic power-of-two buckets.
    let classic_bucket = r#"latscope_span_nanoseconds_bucket{span="req",host="lab1"}"#;
    let classic = [0.5, 0.99].map(|q| {
        promql(
            classic_port,
            &format!("histogram_quantile({q}, {classic_bucket})"),
        )
        .unwrap()
    });
    let status = latscope.0.wait().unwrap();
    assert!(status.success());
    let doc = saved(&save);
    let req = &doc["spans"][0];
    assert_eq!(req["count"], 600);
    assert_eq!(ticks, Some(600.0));
    for (name, classic_value) in [("p50", classic[0]), ("p99", classic[1])] {
        // Classic buckets are whole powers of two: the estimate lies in latscope's one.
        let own = req[name].as_u64().unwrap();
        let (lo, hi) = (1u64 << own.ilog2(), 2u64 << own.ilog2());
        eprintln!(
            "{name}: classic PromQL {classic_value:.0} ns, latscope {own} ns, in [{lo}, {hi}]"
        );
        assert!(
            (lo as f64..=hi as f64).contains(&classic_value),
            "{name}: classic {classic_value} outside [{lo}, {hi}]"
        );
    }
    for (name, promql_value) in [("p50", p50), ("p99", p99)] {
        let own = req[name].as_f64().unwrap();
        let bound = req["histogram"]["percentile_error_bounds"][name]
            .as_f64()
            .unwrap();
        // The mapping's claim (src/fleet/native.rs): one native bucket (schema 5: 2^(1/32) − 1
        // = 2.19%) plus one value's share of the kernel bucket (the rank conventions differ),
        // well inside latscope's own bucket error.
        let bucket = req["histogram"]["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["min"].as_f64().unwrap() <= own && own <= b["max"].as_f64().unwrap())
            .unwrap();
        let width = bucket["max"].as_f64().unwrap() + 1.0 - bucket["min"].as_f64().unwrap();
        let allowed = own * 0.0219 + width / bucket["count"].as_f64().unwrap();
        eprintln!(
            "{name}: PromQL {promql_value:.0} ns, latscope {own} ns ±{bound}, difference {:.0} ns (allowed {allowed:.0})",
            (promql_value - own).abs()
        );
        assert!(
            (promql_value - own).abs() <= allowed.min(bound),
            "{name}: PromQL {promql_value} vs latscope {own} ± {bound}"
        );
    }
}

#[test]
fn a_port_in_use_is_a_clear_error_before_tracing() {
    if !live_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let t = target(dir.path());
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let out = util::run(&[
        "live",
        "--serve",
        &port,
        "--rate",
        &probe(&t, "tick"),
        "--",
        t.to_str().unwrap(),
        "10",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("cannot serve metrics on 127.0.0.1:{port}"))
            && err.contains("the address is in use"),
        "{err}"
    );
    let out = util::run(&["live", "--serve", "nowhere", "--rate", &probe(&t, "tick")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn scrapers_that_hang_up_mid_response_lose_nothing_of_the_session() {
    if !live_available() {
        return;
    }
    let _heavy = util::heavy();
    let dir = tempfile::tempdir().unwrap();
    let t = target(dir.path());
    let save = dir.path().join("live.json");
    let (mut latscope, port) = serve_live(&t, &["400", "2", "0", "3000"], &save, &[]);
    let (head, _) = http_get(port, "/other", "text/plain");
    assert!(head.contains(" 404 "), "{head}");
    let started = Instant::now();
    let mut served = None;
    while started.elapsed() < Duration::from_secs(4) {
        // Ask, read a few bytes, hang up; and a request that is cut off in its headers.
        for _ in 0..20 {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
            let _ = s.read(&mut [0u8; 16]);
            drop(s);
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            let _ = s.write_all(b"GET /metr");
        }
        let (head, body) = http_get(port, "/metrics", "text/plain");
        assert!(head.contains(" 200 "), "{head}");
        served = Some(String::from_utf8(body).unwrap());
        std::thread::sleep(Duration::from_millis(200));
    }
    let status = latscope.0.wait().unwrap();
    assert!(status.success());
    assert_eq!(saved(&save)["spans"][0]["count"], 400);
    let served = served.unwrap();
    assert!(
        served.contains("# TYPE latscope_span_nanoseconds histogram"),
        "{served}"
    );
}

/// The Python of the tests' private venv with DuckDB (scripts/capture/venv.sh makes it);
/// `None` (skip) when it cannot be made, a failure when LATSCOPE_REQUIRE_STACK is set.
fn duckdb_python() -> Option<std::path::PathBuf> {
    util::venv_python(&["duckdb==2.0.0"])
}

/// Runs SQL in DuckDB; one JSON object per result row.
fn duckdb(python: &Path, sql: &str) -> Vec<Value> {
    let script = "import duckdb, json, sys\n\
        con = duckdb.connect()\n\
        cur = con.execute(sys.argv[1])\n\
        names = [d[0] for d in cur.description]\n\
        for row in cur.fetchall():\n    print(json.dumps(dict(zip(names, row)), default=float))\n";
    let out = Command::new(python)
        .args(["-c", script, sql])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{sql}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn export_parquet(result: &str, host: &str, out: &Path) {
    let o = util::run(&[
        "export",
        result,
        "--to",
        "parquet",
        "--host",
        host,
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn duckdb_counts_and_percentiles_over_three_exported_runs_match_latscope_merge() {
    let Some(python) = duckdb_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    std::fs::create_dir(&runs).unwrap();
    let logs = [
        "weston-glmark2-build.client.log",
        "weston-simple-shm.client.log",
        "weston-presentation-shm.client.log",
    ];
    let mut results = Vec::new();
    for (i, log) in logs.iter().enumerate() {
        let log = util::data(log);
        let out = util::run(&["wayland", "--format", "json", log.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
        let result = util::write(dir.path(), &format!("lab{i}.json"), &out.stdout);
        export_parquet(
            result.to_str().unwrap(),
            &format!("lab{i}"),
            &runs.join(format!("lab{i}.parquet")),
        );
        results.push(result.to_str().unwrap().to_string());
    }
    let merged = dir.path().join("merged.json");
    let mut args = vec!["merge"];
    args.extend(results.iter().map(String::as_str));
    args.extend(["-o", merged.to_str().unwrap()]);
    let out = util::run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let merged = saved(&merged);
    let glob = runs.join("*.parquet");
    let glob = glob.to_str().unwrap();
    // The README's query, and nearest-rank percentiles (latscope's definition) in SQL.
    let sql = format!(
        "WITH r AS (SELECT span, coalesce(side, '') AS side, value_ns, \
           row_number() OVER (PARTITION BY span, side ORDER BY value_ns) AS rank, \
           count(*) OVER (PARTITION BY span, side) AS n FROM '{glob}') \
         SELECT span, side, any_value(n) AS n, \
           max(CASE WHEN rank = ceil(0.5 * n) THEN value_ns END) AS p50, \
           max(CASE WHEN rank = ceil(0.99 * n) THEN value_ns END) AS p99, \
           quantile_cont(value_ns, 0.99) AS p99_cont \
         FROM r GROUP BY span, side ORDER BY span, side"
    );
    let rows = duckdb(&python, &sql);
    let hosts = duckdb(
        &python,
        &format!("SELECT count(DISTINCT host) AS hosts FROM '{glob}'"),
    );
    assert_eq!(hosts[0]["hosts"], 3);
    // The README's query, as a user would type it.
    let readme = duckdb(
        &python,
        &format!(
            "SELECT span, quantile_cont(value_ns, 0.99) AS p99 FROM '{glob}' GROUP BY span ORDER BY span"
        ),
    );
    eprintln!("README query: {readme:?}");
    assert!(
        readme.len() == 4
            && readme
                .iter()
                .all(|r| r["p99"].as_f64().is_some_and(|v| v > 0.0)),
        "{readme:?}"
    );
    let spans = merged["spans"].as_array().unwrap();
    assert_eq!(rows.len(), spans.len(), "{rows:?}");
    for s in spans {
        let side = s["side"].as_str().unwrap_or("");
        let row = rows
            .iter()
            .find(|r| r["span"] == s["name"] && r["side"] == side)
            .unwrap_or_else(|| panic!("no DuckDB row for {s}"));
        eprintln!(
            "{} {side}: DuckDB n={} p50={} p99={} p99_cont={} | latscope merge n={} p50={} p99={}",
            s["name"],
            row["n"],
            row["p50"],
            row["p99"],
            row["p99_cont"],
            s["count"],
            s["p50"],
            s["p99"]
        );
        assert_eq!(row["n"], s["count"]);
        for q in ["p50", "p99"] {
            let (sql_value, own) = (row[q].as_f64().unwrap(), s[q].as_f64().unwrap());
            // Both come from the same HdrHistogram values; only a run's own max clamp may differ
            // from the merged one (within HdrHistogram's 0.1%).
            assert!(
                (sql_value - own).abs() <= own * 0.001,
                "{q}: DuckDB {sql_value} vs merge {own}"
            );
        }
    }
}

#[test]
fn bucket_rows_of_live_runs_add_up_to_the_merged_counts_in_duckdb() {
    let Some(python) = duckdb_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, buckets: &[(u64, u64, u64)], count: u64| {
        let doc = util::spans_doc(&[util::series(
            "req",
            count,
            [50_000, 51_000, 200_000, 200_000],
            [1_000, 8_000],
            buckets,
        )]);
        util::write(dir.path(), name, doc)
            .to_str()
            .unwrap()
            .to_string()
    };
    let a = run("a.json", &[(49_152, 53_247, 2), (196_608, 212_991, 1)], 3);
    let b = run("b.json", &[(49_152, 53_247, 5)], 5);
    let empty = util::write(dir.path(), "empty.json", util::spans_doc(&[]));
    for (i, r) in [&a, &b].iter().enumerate() {
        export_parquet(r, "lab", &dir.path().join(format!("{i}.parquet")));
    }
    let out = util::run(&[
        "export",
        empty.to_str().unwrap(),
        "--to",
        "parquet",
        "-o",
        dir.path().join("2.parquet").to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("has no samples: wrote a table with no rows"),
        "{}",
        stderr(&out)
    );
    let merged = util::run(&["merge", &a, &b]);
    assert!(merged.status.success(), "{}", stderr(&merged));
    let merged: Value = serde_json::from_slice(&merged.stdout).unwrap();
    let glob = dir.path().join("*.parquet");
    let rows = duckdb(
        &python,
        &format!(
            "SELECT bucket_min_ns, sum(count) AS n FROM '{}' GROUP BY ALL ORDER BY 1",
            glob.display()
        ),
    );
    let merged_buckets: Vec<(u64, u64)> = merged["spans"][0]["histogram"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| (b["min"].as_u64().unwrap(), b["count"].as_u64().unwrap()))
        .collect();
    let sql: Vec<(u64, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["bucket_min_ns"].as_u64().unwrap(),
                r["n"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(sql, merged_buckets);
    assert_eq!(merged_buckets, vec![(49_152, 7), (196_608, 1)]);
}

#[test]
fn compare_accepts_a_merged_result() {
    let dir = tempfile::tempdir().unwrap();
    let before = util::compare_input(dir.path(), "glmark2-weston.before.client.log", "b.json");
    let throttled =
        util::compare_input(dir.path(), "glmark2-weston.throttled.client.log", "t.json");
    let merged = dir.path().join("merged.json");
    let out = util::run(&["merge", &before, &throttled, "-o", merged.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let doc = saved(&merged);
    assert_eq!(doc["merged_from"].as_array().unwrap().len(), 2);
    let out = util::run(&["compare", &before, merged.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        util::stdout(&out).contains("commit_to_release"),
        "{}",
        util::stdout(&out)
    );
}

#[test]
fn merging_different_kinds_is_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let spans = util::compare_input(dir.path(), "glmark2-weston.before.client.log", "s.json");
    let probes = util::write(
        dir.path(),
        "p.json",
        r#"{"kind":"probes","version":1,"files":[]}"#,
    );
    let out = util::run(&["merge", &spans, probes.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("p.json is a probes result: a probe list is not a distribution"),
        "{}",
        stderr(&out)
    );
    let out = util::run(&["merge", &spans]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
