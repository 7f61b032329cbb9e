//! The report's `connection_setup` section: what opening connections cost (connect and
//! TLS handshake), kept apart from request latency. Pure.

use serde::{Deserialize, Serialize};

use super::LatencyMs;
use crate::setup::Setup;
use crate::timing::Figure;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SetupHistograms {
    pub connect: String,
    pub handshake: String,
    pub setup: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SetupReport {
    /// Connections opened over the run, those opened before its clock started included.
    pub connections: u64,
    /// TLS handshakes completed, and those that failed (re-connections during the run).
    pub handshakes: u64,
    pub handshake_failures: u64,
    /// What the handshake agreed on (the first connection's), null without TLS.
    pub tls_version: Option<String>,
    pub cipher_suite: Option<String>,
    /// From just before connect(2) to the socket connected.
    pub connect_ms: Option<LatencyMs>,
    /// From the connected socket to the TLS handshake done; null without TLS.
    pub handshake_ms: Option<LatencyMs>,
    /// connect + handshake: what a connection costs before its first request.
    pub setup_ms: Option<LatencyMs>,
    /// In µs, encoded as the report's other histograms.
    pub histograms: SetupHistograms,
}

fn figure(f: &Figure) -> Option<LatencyMs> {
    (!f.histogram.is_empty()).then(|| LatencyMs::of(&f.histogram, &f.moments))
}

fn encode(f: &Figure) -> String {
    f.histogram
        .encode_base64()
        .expect("a histogram always encodes")
}

pub fn setup(s: &Setup) -> SetupReport {
    SetupReport {
        connections: s.connections,
        handshakes: s.handshakes,
        handshake_failures: s.handshake_failures,
        tls_version: s.tls_version.clone(),
        cipher_suite: s.cipher_suite.clone(),
        connect_ms: figure(&s.connect),
        handshake_ms: figure(&s.handshake),
        setup_ms: figure(&s.setup),
        histograms: SetupHistograms {
            connect: encode(&s.connect),
            handshake: encode(&s.handshake),
            setup: encode(&s.setup),
        },
    }
}

/// The human summary's line on set-up, or nothing when no connection was opened.
pub fn setup_line(r: &SetupReport) -> String {
    let Some(total) = &r.setup_ms else {
        return String::new();
    };
    let mut out = format!(
        "connection set-up (not in the latencies above): {} connections",
        r.connections
    );
    if r.handshakes > 0 || r.handshake_failures > 0 {
        out += &format!(", {} TLS handshakes", r.handshakes);
        if r.handshake_failures > 0 {
            out += &format!(" ({} failed)", r.handshake_failures);
        }
        if let (Some(v), Some(c)) = (&r.tls_version, &r.cipher_suite) {
            out += &format!(", {v} {c}");
        }
    }
    out += "\n";
    let row = |name: &str, l: &LatencyMs| {
        format!(
            "  {name:<13}{:>9.3}{:>9.3}{:>9.3}{:>9.3} ms avg/p50/p99/max\n",
            l.avg, l.p50, l.p99, l.max
        )
    };
    if let Some(c) = &r.connect_ms {
        out += &row("connect", c);
    }
    if let Some(h) = &r.handshake_ms {
        out += &row("handshake", h);
    }
    out += &row("set-up", total);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::SetupTimes;

    #[test]
    fn the_line_counts_handshakes_and_shows_each_step() {
        let mut s = Setup::default();
        s.opened(SetupTimes {
            connect_ns: 50_000,
            handshake_ns: Some(1_000_000),
        });
        s.negotiated(
            Some("TLSv1_3".into()),
            Some("TLS13_AES_256_GCM_SHA384".into()),
        );
        let r = setup(&s);
        assert_eq!(r.handshakes, 1);
        assert_eq!(r.setup_ms.unwrap().max, 1.05);
        let line = setup_line(&r);
        assert!(line.starts_with(
            "connection set-up (not in the latencies above): 1 connections, 1 TLS handshakes, TLSv1_3 TLS13_AES_256_GCM_SHA384\n"
        ), "{line}");
        assert!(line.contains("  handshake        1.000"), "{line}");
    }

    #[test]
    fn without_tls_there_is_no_handshake_row_and_no_connection_no_line() {
        let mut s = Setup::default();
        s.opened(SetupTimes {
            connect_ns: 50_000,
            handshake_ns: None,
        });
        let r = setup(&s);
        assert!(r.handshake_ms.is_none() && r.tls_version.is_none());
        let line = setup_line(&r);
        assert!(!line.contains("handshake"), "{line}");
        assert_eq!(setup_line(&setup(&Setup::default())), "");
    }
}
