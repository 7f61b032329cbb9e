//! `--tls-protocols`: which TLS versions are served or offered. Both binaries take the
//! same spellings: memtier_benchmark's (`TLSv1.2,TLSv1.3`) and the short one (`1.2,1.3`),
//! comma or space separated, in any case.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

/// Why a `--tls-protocols` list was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProtocolsError {
    /// A version rustls does not speak because it is deprecated.
    #[error(
        "{0} is not offered: it is deprecated (RFC 8996) and rustls speaks TLSv1.2 and \
         TLSv1.3 only"
    )]
    Deprecated(String),
    #[error("{0:?} is not one of TLSv1.2, TLSv1.3 (or 1.2, 1.3; comma-separated)")]
    Unknown(String),
    #[error("no TLS version given: expected TLSv1.2, TLSv1.3 or both (comma-separated)")]
    Empty,
}

/// The TLS versions allowed. rustls speaks 1.2 and 1.3 only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Protocols {
    pub tls12: bool,
    pub tls13: bool,
}

impl Default for Protocols {
    fn default() -> Self {
        Protocols {
            tls12: true,
            tls13: true,
        }
    }
}

impl Protocols {
    /// `"TLSv1.2,TLSv1.3"`, `"1.3"`, `"tlsv1.2 1.3"`, ...
    pub fn parse(text: &str) -> Result<Protocols, ProtocolsError> {
        let mut out = Protocols {
            tls12: false,
            tls13: false,
        };
        for item in text.split([',', ' ']).filter(|s| !s.is_empty()) {
            let lower = item.to_ascii_lowercase();
            match lower.strip_prefix("tlsv").unwrap_or(&lower) {
                "1.2" => out.tls12 = true,
                "1.3" => out.tls13 = true,
                "1" | "1.0" | "1.1" => return Err(ProtocolsError::Deprecated(item.to_string())),
                _ if lower.starts_with("ssl") => {
                    return Err(ProtocolsError::Deprecated(item.to_string()))
                }
                _ => return Err(ProtocolsError::Unknown(item.to_string())),
            }
        }
        if !out.tls12 && !out.tls13 {
            return Err(ProtocolsError::Empty);
        }
        Ok(out)
    }

    /// memtier's spelling, e.g. `TLSv1.2,TLSv1.3`.
    pub fn names(self) -> String {
        let mut names = Vec::new();
        if self.tls12 {
            names.push("TLSv1.2");
        }
        if self.tls13 {
            names.push("TLSv1.3");
        }
        names.join(",")
    }

    /// The versions for rustls's builders, the newest first.
    pub fn versions(self) -> Vec<&'static rustls::SupportedProtocolVersion> {
        let mut v = Vec::new();
        if self.tls13 {
            v.push(&rustls::version::TLS13);
        }
        if self.tls12 {
            v.push(&rustls::version::TLS12);
        }
        v
    }
}

impl FromStr for Protocols {
    type Err = ProtocolsError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Protocols::parse(text)
    }
}

impl fmt::Display for Protocols {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.names())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TLS12: Protocols = Protocols {
        tls12: true,
        tls13: false,
    };
    const TLS13: Protocols = Protocols {
        tls12: false,
        tls13: true,
    };

    #[test]
    fn memtiers_spelling_and_the_short_one_are_read() {
        assert_eq!(Protocols::parse("TLSv1.2").unwrap(), TLS12);
        assert_eq!(Protocols::parse("1.3").unwrap(), TLS13);
        assert_eq!(
            Protocols::parse("TLSv1.3, TLSv1.2").unwrap(),
            Protocols::default()
        );
        assert_eq!(
            Protocols::parse("tlsv1.2, 1.3").unwrap(),
            Protocols::default()
        );
        assert_eq!(Protocols::parse("1.2 1.3").unwrap(), Protocols::default());
    }

    #[test]
    fn names_are_memtiers_and_read_back() {
        assert_eq!(Protocols::default().names(), "TLSv1.2,TLSv1.3");
        assert_eq!(TLS13.to_string(), "TLSv1.3");
        for p in [TLS12, TLS13, Protocols::default()] {
            assert_eq!(p.names().parse::<Protocols>().unwrap(), p);
        }
    }

    #[test]
    fn old_versions_are_refused_with_the_reason() {
        let e = Protocols::parse("TLSv1.1,TLSv1.2").unwrap_err().to_string();
        assert!(
            e.starts_with("TLSv1.1 is not offered: it is deprecated"),
            "{e}"
        );
        for old in ["TLSv1", "1.0", "SSLv3"] {
            assert_eq!(
                Protocols::parse(old),
                Err(ProtocolsError::Deprecated(old.into()))
            );
        }
    }

    #[test]
    fn an_unknown_or_empty_list_is_refused() {
        let e = Protocols::parse("TLSv1.4").unwrap_err().to_string();
        assert!(e.starts_with("\"TLSv1.4\" is not one of"), "{e}");
        assert_eq!(Protocols::parse(""), Err(ProtocolsError::Empty));
        assert_eq!(Protocols::parse(" , "), Err(ProtocolsError::Empty));
    }

    #[test]
    fn versions_are_the_newest_first() {
        let v = Protocols::default().versions();
        assert_eq!(v[0].version, rustls::ProtocolVersion::TLSv1_3);
        assert_eq!(v[1].version, rustls::ProtocolVersion::TLSv1_2);
        assert_eq!(TLS12.versions().len(), 1);
    }
}
