//! Serving `/metrics` over HTTP on its own thread: the I/O edge of [`super::metrics`].
//!
//! The server is [`super::http`]: one thread, at most 64 connections, request heads of at most
//! 8 KiB, read, idle and write timeouts (tiny_http, used before, could not be bounded: see
//! there). The thread only reads the shared snapshot; a scraper that disconnects
//! mid-response, or any other HTTP failure, ends that one connection and nothing else: the
//! live session never waits on the server and loses nothing.
//!
//! Content negotiation, as Prometheus does it: a scraper that accepts
//! `application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily` (Prometheus with
//! `--enable-feature=native-histograms`) gets length-delimited protobuf with native histograms;
//! every other one gets OpenMetrics text with classic power-of-two buckets. Only `GET /metrics`
//! (and `HEAD`) is served; anything else is 404 or 405.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use prometheus_client::registry::Registry;

use super::http::{Limits, Request, Response, Server};
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

/// A running metrics server; dropping it stops and joins its thread.
#[derive(Debug)]
pub struct MetricsServer {
    _server: Server,
    /// the address actually bound (the port is known even when 0 was asked)
    pub addr: SocketAddr,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot serve metrics on {addr}: {reason}")]
pub struct ServeError {
    addr: SocketAddr,
    reason: String,
}

impl MetricsServer {
    /// Binds `addr` and serves `registry` on a new thread, within the default [`Limits`].
    pub fn start(addr: SocketAddr, registry: Registry) -> Result<MetricsServer, ServeError> {
        let server = Server::start(addr, Limits::default(), move |r: &Request| {
            respond(r, &registry)
        })
        .map_err(|e| ServeError {
            addr,
            reason: bind_reason(&e),
        })?;
        Ok(MetricsServer {
            addr: server.addr,
            _server: server,
        })
    }
}

fn bind_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::AddrInUse => {
            "the address is in use (another exporter or latscope?): choose another port".into()
        }
        std::io::ErrorKind::AddrNotAvailable => {
            "no interface has this address: use 127.0.0.1 or one of this machine's addresses".into()
        }
        std::io::ErrorKind::PermissionDenied => {
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

fn respond(request: &Request, registry: &Registry) -> Response {
    let path = request.path.split('?').next().unwrap_or("");
    if path != "/metrics" {
        return Response::text(404, "not found: latscope serves /metrics\n");
    }
    if request.method != "GET" && request.method != "HEAD" {
        return Response::text(405, "only GET\n");
    }
    let (body, content_type) = if wants_protobuf(&request.accept) {
        (metrics::protobuf(registry), PROTOBUF)
    } else {
        (
            metrics::text(registry)
                .map(String::into_bytes)
                .map_err(|e| e.to_string()),
            OPENMETRICS,
        )
    };
    match body {
        Ok(body) => Response {
            status: 200,
            content_type,
            body,
        },
        Err(e) => Response::text(500, &format!("cannot encode the metrics: {e}\n")),
    }
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
