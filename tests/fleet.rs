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
struct Guard(Child);

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
fn http_get(port: u16, path: &str, accept: &str) -> (String, Vec<u8>) {
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
fn serve_live(t: &Path, target_args: &[&str], save: &Path, extra: &[&str]) -> (Guard, u16) {
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

/// Prometheus with native histograms, on loopback, scraping `target_port` every second, its
/// storage in `dir`.
fn start_prometheus(dir: &Path, target_port: u16) -> (Guard, u16) {
    let port = free_port();
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
        .arg("--enable-feature=native-histograms")
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
    let (_prometheus, prom_port) = start_prometheus(dir.path(), serve_port);
    let series = r#"latscope_span_nanoseconds{span="req",host="lab1",job="latscope"}"#;
    let started = Instant::now();
    let mut count = None;
    while started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(500));
        // Prometheus may still be starting: a refused connection is retried.
        if TcpStream::connect(("127.0.0.1", prom_port)).is_err() {
            continue;
        }
        count = promql(prom_port, &format!("histogram_count({series})"));
        if count == Some(600.0) {
            break;
        }
    }
    assert_eq!(count, Some(600.0), "Prometheus never saw all 600 spans");
    let p50 = promql(prom_port, &format!("histogram_quantile(0.5, {series})")).unwrap();
    let p99 = promql(prom_port, &format!("histogram_quantile(0.99, {series})")).unwrap();
    let ticks = promql(prom_port, r#"latscope_rate_events_total{host="lab1"}"#);
    let status = latscope.0.wait().unwrap();
    assert!(status.success());
    let doc = saved(&save);
    let req = &doc["spans"][0];
    assert_eq!(req["count"], 600);
    assert_eq!(ticks, Some(600.0));
    for (name, promql_value) in [("p50", p50), ("p99", p99)] {
        let own = req[name].as_f64().unwrap();
        let bound = req["histogram"]["percentile_error_bounds"][name]
            .as_f64()
            .unwrap();
        // latscope's bucket error plus one native bucket (schema 5: 2^(1/32) − 1 = 2.19%).
        let allowed = bound + own * 0.0219;
        eprintln!(
            "{name}: PromQL {promql_value:.0} ns, latscope {own} ns ±{bound}, difference {:.0} ns (allowed {allowed:.0})",
            (promql_value - own).abs()
        );
        assert!(
            (promql_value - own).abs() <= allowed,
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
