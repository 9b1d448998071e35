//! Serving `/metrics` over HTTP on its own thread: the I/O edge of [`super::metrics`].
//!
//! Why tiny_http: one small, long-maintained crate (4 light dependencies, no async runtime)
//! parses HTTP/1.1 (keep-alive, pipelining, bad requests) so that a hand-written parser does not
//! have to; a Prometheus server is the only expected client. The thread only reads the shared
//! snapshot; a scraper that disconnects mid-response, or any other HTTP failure, ends that one
//! response and nothing else: the live session never waits on the server and loses nothing.
//!
//! Content negotiation, as Prometheus does it: a scraper that accepts
//! `application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily` (Prometheus with
//! `--enable-feature=native-histograms`) gets length-delimited protobuf with native histograms;
//! every other one gets OpenMetrics text with classic power-of-two buckets. Only `GET /metrics`
//! (and `HEAD`) is served; anything else is 404 or 405.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::thread::JoinHandle;

use prometheus_client::registry::Registry;
use tiny_http::{Header, Method, Request, Response, Server};

use super::metrics;

/// The content type of the protobuf exposition format.
pub const PROTOBUF: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";
/// The content type of OpenMetrics text.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// `PORT` (loopback) or `ADDR:PORT` (`[::1]:PORT` for IPv6).
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    text.parse::<SocketAddr>().map_err(|_| {
        format!("--serve {text:?}: expected PORT (on 127.0.0.1) or ADDR:PORT, e.g. 127.0.0.1:9464")
    })
}

/// A running metrics server; dropping it stops the thread.
pub struct MetricsServer {
    server: Arc<Server>,
    thread: Option<JoinHandle<()>>,
    /// the address actually bound (the port is known even when 0 was asked)
    pub addr: SocketAddr,
}

impl std::fmt::Debug for MetricsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsServer")
            .field("addr", &self.addr)
            .finish()
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot serve metrics on {addr}: {reason}")]
pub struct ServeError {
    addr: SocketAddr,
    reason: String,
}

impl MetricsServer {
    /// Binds `addr` and serves `registry` on a new thread.
    pub fn start(addr: SocketAddr, registry: Registry) -> Result<MetricsServer, ServeError> {
        let server = Server::http(addr).map_err(|e| ServeError {
            addr,
            reason: bind_reason(e.as_ref()),
        })?;
        let bound = server.server_addr().to_ip().ok_or_else(|| ServeError {
            addr,
            reason: "not an IP socket".to_string(),
        })?;
        let server = Arc::new(server);
        let serving = server.clone();
        let thread = std::thread::Builder::new()
            .name("latscope-metrics".into())
            .spawn(move || {
                for request in serving.incoming_requests() {
                    respond(request, &registry);
                }
            })
            .map_err(|e| ServeError {
                addr,
                reason: e.to_string(),
            })?;
        Ok(MetricsServer {
            server,
            thread: Some(thread),
            addr: bound,
        })
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        // Not joined: the thread may be blocked writing to a scraper that stopped reading, and
        // latscope must still exit; it ends with the process.
        self.server.unblock();
        drop(self.thread.take());
    }
}

fn bind_reason(e: &(dyn std::error::Error + 'static)) -> String {
    match e.downcast_ref::<std::io::Error>().map(std::io::Error::kind) {
        Some(std::io::ErrorKind::AddrInUse) => {
            "the address is in use (another exporter or latscope?): choose another port".into()
        }
        Some(std::io::ErrorKind::AddrNotAvailable) => {
            "no interface has this address: use 127.0.0.1 or one of this machine's addresses".into()
        }
        Some(std::io::ErrorKind::PermissionDenied) => {
            "permission denied (ports below 1024 need privileges)".into()
        }
        _ => e.to_string(),
    }
}

/// Whether an `Accept` header asks for the protobuf exposition format.
pub fn wants_protobuf(accept: &str) -> bool {
    accept.split(',').any(|part| {
        let part = part.to_ascii_lowercase();
        part.contains("application/vnd.google.protobuf")
            && part.contains("proto=io.prometheus.client.metricfamily")
            && part.contains("encoding=delimited")
    })
}

fn respond(request: Request, registry: &Registry) {
    let path = request.url().split('?').next().unwrap_or("");
    let method = request.method().clone();
    // A client gone mid-response is an error of that response only: ignored.
    if path != "/metrics" {
        let _ = request.respond(
            Response::from_string("not found: latscope serves /metrics\n").with_status_code(404),
        );
        return;
    }
    if method != Method::Get && method != Method::Head {
        let _ = request.respond(Response::from_string("only GET\n").with_status_code(405));
        return;
    }
    let accept = request
        .headers()
        .iter()
        .filter(|h| h.field.equiv("Accept"))
        .map(|h| h.value.as_str().to_string())
        .collect::<Vec<_>>()
        .join(",");
    let (body, content_type) = if wants_protobuf(&accept) {
        (metrics::protobuf(registry), PROTOBUF)
    } else {
        (
            metrics::text(registry)
                .map(String::into_bytes)
                .map_err(|e| e.to_string()),
            OPENMETRICS,
        )
    };
    let response = match body {
        Ok(body) => {
            let mut response = Response::from_data(body);
            if let Ok(h) = Header::from_bytes(&b"Content-Type"[..], content_type.as_bytes()) {
                response.add_header(h);
            }
            response
        }
        Err(e) => {
            Response::from_string(format!("cannot encode the metrics: {e}\n")).with_status_code(500)
        }
    };
    let _ = request.respond(response);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_port_binds_loopback_and_an_address_is_taken_as_given() {
        assert_eq!(parse_listen("9464").unwrap().to_string(), "127.0.0.1:9464");
        assert_eq!(
            parse_listen("0.0.0.0:9464").unwrap().to_string(),
            "0.0.0.0:9464"
        );
        assert_eq!(parse_listen("[::1]:80").unwrap().to_string(), "[::1]:80");
        assert!(parse_listen("localhost").is_err());
    }

    #[test]
    fn prometheus_with_native_histograms_is_recognised_by_its_accept_header() {
        // What Prometheus 2.42 sends with --enable-feature=native-histograms.
        let native = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.8,application/openmetrics-text;version=1.0.0;q=0.7,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert!(wants_protobuf(native));
        assert!(!wants_protobuf(
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        ));
        assert!(!wants_protobuf(""));
    }
}
