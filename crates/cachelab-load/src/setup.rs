//! Connection set-up, measured apart from request latency: how long each connection took
//! to open (the TCP or Unix connect) and, with `--tls`, to finish its TLS handshake, and
//! how many handshakes there were (and failed). Pure: the runner hands in the times.
//!
//! Where the timers start and stop (the runner's monotonic clock):
//! - **connect**: from just before `connect(2)` to the socket connected;
//! - **handshake**: from the connected socket to the handshake done (the client's
//!   Finished sent, the server's verified);
//! - **setup** = connect + handshake: what a new connection costs before its first
//!   request. Connections opened before the run's clock starts count too (they are
//!   never in request latency); so do re-connections during the run.

use crate::timing::Figure;

/// One connection's set-up, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetupTimes {
    pub connect_ns: u64,
    /// `None` without TLS.
    pub handshake_ns: Option<u64>,
}

/// The set-up figures of a run (every connection opened, whenever).
#[derive(Debug, Clone, Default)]
pub struct Setup {
    /// Connections opened (and handshaken, with TLS).
    pub connections: u64,
    /// TLS handshakes completed, and those that failed.
    pub handshakes: u64,
    pub handshake_failures: u64,
    pub connect: Figure,
    pub handshake: Figure,
    pub setup: Figure,
    /// The TLS version and cipher suite negotiated (the first connection's).
    pub tls_version: Option<String>,
    pub cipher_suite: Option<String>,
}

impl Setup {
    pub fn opened(&mut self, t: SetupTimes) {
        self.connections += 1;
        self.connect.add(t.connect_ns);
        if let Some(h) = t.handshake_ns {
            self.handshakes += 1;
            self.handshake.add(h);
        }
        self.setup.add(t.connect_ns + t.handshake_ns.unwrap_or(0));
    }

    pub fn handshake_failed(&mut self) {
        self.handshake_failures += 1;
    }

    /// What the handshake agreed on (kept from the first connection that says).
    pub fn negotiated(&mut self, version: Option<String>, suite: Option<String>) {
        if self.tls_version.is_none() {
            self.tls_version = version;
        }
        if self.cipher_suite.is_none() {
            self.cipher_suite = suite;
        }
    }

    pub fn merge(&mut self, other: &Setup) {
        self.connections += other.connections;
        self.handshakes += other.handshakes;
        self.handshake_failures += other.handshake_failures;
        self.connect.merge(&other.connect);
        self.handshake.merge(&other.handshake);
        self.setup.merge(&other.setup);
        self.negotiated(other.tls_version.clone(), other.cipher_suite.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_is_connect_plus_handshake_and_handshakes_are_counted() {
        let mut s = Setup::default();
        s.opened(SetupTimes {
            connect_ns: 40_000,
            handshake_ns: Some(960_000),
        });
        s.opened(SetupTimes {
            connect_ns: 60_000,
            handshake_ns: Some(1_940_000),
        });
        assert_eq!((s.connections, s.handshakes), (2, 2));
        assert_eq!(s.connect.moments.mean, 50.0);
        assert_eq!(s.handshake.moments.mean, 1450.0);
        assert_eq!(s.setup.moments.mean, 1500.0);
        assert_eq!(s.setup.histogram.percentiles().max, 2000);
    }

    #[test]
    fn without_tls_there_is_no_handshake_and_setup_is_the_connect() {
        let mut s = Setup::default();
        s.opened(SetupTimes {
            connect_ns: 30_000,
            handshake_ns: None,
        });
        assert_eq!((s.connections, s.handshakes), (1, 0));
        assert!(s.handshake.histogram.is_empty());
        assert_eq!(s.setup.moments.mean, s.connect.moments.mean);
    }

    #[test]
    fn merging_adds_counts_and_keeps_the_first_negotiation() {
        let mut a = Setup::default();
        a.negotiated(Some("TLSv1_3".into()), None);
        let mut b = Setup::default();
        b.opened(SetupTimes {
            connect_ns: 1_000,
            handshake_ns: Some(2_000),
        });
        b.handshake_failed();
        b.negotiated(
            Some("TLSv1_2".into()),
            Some("TLS13_AES_256_GCM_SHA384".into()),
        );
        a.merge(&b);
        assert_eq!(
            (a.connections, a.handshakes, a.handshake_failures),
            (1, 1, 1)
        );
        assert_eq!(a.tls_version.as_deref(), Some("TLSv1_3"));
        assert_eq!(a.cipher_suite.as_deref(), Some("TLS13_AES_256_GCM_SHA384"));
    }
}
