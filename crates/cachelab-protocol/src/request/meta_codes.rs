//! The meta protocol's vocabulary: its commands and its reply codes, and which replies
//! quiet mode leaves out. Apart from the parser ([`super::meta`]) and the flag rules
//! ([`super::meta_flags`]) because both use it.

/// A meta command (its two-letter name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetaCmd {
    Get,
    Set,
    Delete,
    Arith,
    Debug,
    Noop,
}

impl MetaCmd {
    /// Whether quiet mode (`q`) leaves out a reply with this status, as memcached does:
    /// a miss for mg, success for ms, md and ma (whatever the flags asked for).
    pub fn quiet_drops(self, status: MetaStatus) -> bool {
        use MetaStatus::*;
        matches!(
            (self, status),
            (MetaCmd::Get, En)
                | (MetaCmd::Set, Hd)
                | (MetaCmd::Delete, Hd)
                | (MetaCmd::Arith, Hd | Va)
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            MetaCmd::Get => "mg",
            MetaCmd::Set => "ms",
            MetaCmd::Delete => "md",
            MetaCmd::Arith => "ma",
            MetaCmd::Debug => "me",
            MetaCmd::Noop => "mn",
        }
    }
}

/// A meta reply's two-letter code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetaStatus {
    /// Success without a value.
    Hd,
    /// A value follows.
    Va,
    /// Miss (mg, me).
    En,
    /// Not found (md, ma).
    Nf,
    /// Not stored (ms).
    Ns,
    /// The cas did not match.
    Ex,
    /// The no-op's answer.
    Mn,
    /// Debug information.
    Me,
}

impl MetaStatus {
    pub fn from_code(code: &[u8]) -> Option<MetaStatus> {
        Some(match code {
            b"HD" => MetaStatus::Hd,
            b"VA" => MetaStatus::Va,
            b"EN" => MetaStatus::En,
            b"NF" => MetaStatus::Nf,
            b"NS" => MetaStatus::Ns,
            b"EX" => MetaStatus::Ex,
            b"MN" => MetaStatus::Mn,
            b"ME" => MetaStatus::Me,
            _ => return None,
        })
    }
}
