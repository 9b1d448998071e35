//! x11perf beside the lab (`--compare-x11perf`): the trusted rate of the same requests on the
//! same server, so a user sees on their own machine that the lab's client is not the limit.
//!
//! x11perf's `-putimageN` and `-shmputN` issue N×N ZPixmap images of the window's depth back to
//! back, as the lab's `--pipelined` uploads do; only those rows have a counterpart. x11perf runs
//! once before the lab's configurations and once after, and the row gets the mean of the two
//! (the server may warm up or slow down during the run). Parsing is pure; running is at the edge.

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{Method, Pattern, X11Error};

/// One x11perf test that mirrors a configuration.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Test {
    /// the option, `-putimage10`
    pub option: String,
    /// the name x11perf prints, `PutImage 10x10 square`
    pub label: String,
}

/// The x11perf test issuing the requests of `p` on a server whose root window has depth
/// `root_depth`, if x11perf has one (pipelined, square 10, 100 or 500, the root's depth).
pub fn test_for(p: &Pattern, root_depth: u8) -> Option<Test> {
    let Pattern::Upload(u) = p else { return None };
    if !u.pipelined || u.width != u.height || u.depth != root_depth {
        return None;
    }
    let n = u.width;
    if ![10, 100, 500].contains(&n) {
        return None;
    }
    Some(match u.method {
        Method::Put => Test {
            option: format!("-putimage{n}"),
            label: format!("PutImage {n}x{n} square"),
        },
        Method::Shm => Test {
            option: format!("-shmput{n}"),
            label: format!("ShmPutImage {n}x{n} square"),
        },
    })
}

/// The rate per second of every test in x11perf's output, by the name it prints: lines
/// `N reps @ T msec (R/sec): NAME` (with `-repeat` above 1, the `trep` average line comes last
/// and wins).
pub fn parse_rates(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(open) = line.find('(') else { continue };
        let rest = &line[open + 1..];
        let Some((rate, name)) = rest.split_once("/sec): ") else {
            continue;
        };
        if let Ok(rate) = rate.trim().parse::<f64>() {
            out.insert(name.trim().to_string(), rate);
        }
    }
    out
}

/// Rates measured before and after the lab's run.
#[derive(Debug, Clone, PartialEq)]
pub struct Rates {
    /// per test name, per second
    pub before: BTreeMap<String, f64>,
    /// per test name, per second
    pub after: BTreeMap<String, f64>,
}

impl Rates {
    /// The mean of before and after for `test` (one of them when the other is missing).
    pub fn mean(&self, test: &Test) -> Option<(f64, f64, f64)> {
        let b = self.before.get(&test.label).copied();
        let a = self.after.get(&test.label).copied();
        match (b, a) {
            (Some(b), Some(a)) => Some((b, a, (a + b) / 2.0)),
            (Some(x), None) | (None, Some(x)) => {
                Some((b.unwrap_or(f64::NAN), a.unwrap_or(f64::NAN), x))
            }
            (None, None) => None,
        }
    }
}

/// Runs `x11perf -repeat 1 -time SECONDS TESTS` on the server `env` names; returns its rates.
pub fn run(
    tests: &[Test],
    env: &[(String, String)],
    seconds: u32,
) -> Result<BTreeMap<String, f64>, X11Error> {
    let fail = |m: String| X11Error::Protocol(format!("x11perf: {m}"));
    let mut cmd = Command::new("x11perf");
    cmd.args(["-repeat", "1", "-time", &seconds.to_string()])
        .args(tests.iter().map(|t| t.option.as_str()))
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: prctl only, between fork and exec: x11perf dies with latscope.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            fail("not installed (Debian: apt-get install x11-apps)".into())
        }
        _ => fail(e.to_string()),
    })?;
    // Calibration takes a few seconds per test before the timed run.
    let limit = Duration::from_secs(30 + tests.len() as u64 * (u64::from(seconds) + 10));
    let deadline = Instant::now() + limit;
    let stdout = child.stdout.take();
    let reader = std::thread::Builder::new().spawn(move || {
        let mut text = String::new();
        if let Some(mut out) = stdout {
            let _ = std::io::Read::read_to_string(&mut out, &mut text);
        }
        text
    });
    let reader = match reader {
        Ok(reader) => reader,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(fail(format!(
                "cannot start a thread to read its output: {e}"
            )));
        }
    };
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(fail(format!("did not finish within {} s", limit.as_secs())));
            }
        }
    };
    let text = reader.join().unwrap_or_default();
    let rates = parse_rates(&text);
    let missing: Vec<&str> = tests
        .iter()
        .filter(|t| !rates.contains_key(&t.label))
        .map(|t| t.option.as_str())
        .collect();
    if !missing.is_empty() {
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut err);
        }
        return Err(fail(format!(
            "no rate for {} ({status}): {}",
            missing.join(" "),
            err.lines().last().unwrap_or("")
        )));
    }
    Ok(rates)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lab::x11::Upload;

    fn upload(method: Method, n: u16, depth: u8, pipelined: bool) -> Pattern {
        Pattern::Upload(Upload {
            method,
            width: n,
            height: n,
            depth,
            segments: 1,
            pipelined,
        })
    }

    #[test]
    fn only_pipelined_square_uploads_at_the_root_depth_have_an_x11perf_test() {
        let t = test_for(&upload(Method::Put, 10, 24, true), 24).unwrap();
        assert_eq!(t.option, "-putimage10");
        assert_eq!(t.label, "PutImage 10x10 square");
        let t = test_for(&upload(Method::Shm, 100, 24, true), 24).unwrap();
        assert_eq!(t.option, "-shmput100");
        assert_eq!(test_for(&upload(Method::Put, 10, 24, false), 24), None);
        assert_eq!(test_for(&upload(Method::Put, 10, 8, true), 24), None);
        assert_eq!(test_for(&upload(Method::Put, 32, 24, true), 24), None);
        assert_eq!(test_for(&Pattern::RoundTrip, 24), None);
    }

    #[test]
    fn rates_are_read_from_x11perf_output_with_the_average_line_last() {
        // x11perf 1.6.1 on Xvfb, -repeat 2
        let text = "x11perf - X11 performance program, version 1.6.1\n\
            \n\
            Sync time adjustment is 0.0298 msecs.\n\
            \n\
            \x20 4000000 reps @   0.0002 msec (4690000.0/sec): PutImage 10x10 square\n\
            \x20 4000000 reps @   0.0002 msec (4610000.0/sec): PutImage 10x10 square\n\
            \x20 8000000 trep @   0.0002 msec (4650000.0/sec): PutImage 10x10 square\n\
            \n\
            \x20   40000 reps @   0.0273 msec ( 36600.0/sec): ShmPutImage 100x100 square\n";
        let rates = parse_rates(text);
        assert_eq!(rates.len(), 2);
        assert_eq!(rates["PutImage 10x10 square"], 4_650_000.0);
        assert_eq!(rates["ShmPutImage 100x100 square"], 36_600.0);
    }

    #[test]
    fn the_rate_beside_a_row_is_the_mean_of_before_and_after() {
        let t = test_for(&upload(Method::Put, 10, 24, true), 24).unwrap();
        let rates = Rates {
            before: BTreeMap::from([(t.label.clone(), 100.0)]),
            after: BTreeMap::from([(t.label.clone(), 300.0)]),
        };
        assert_eq!(rates.mean(&t), Some((100.0, 300.0, 200.0)));
        let after_only = Rates {
            before: BTreeMap::new(),
            after: rates.after.clone(),
        };
        assert_eq!(after_only.mean(&t).map(|m| m.2), Some(300.0));
    }
}
