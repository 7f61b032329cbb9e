//! Where the proxy answers a RESP request differently from Redis on purpose, in one
//! place: each difference names the docs/redis-pools.md rule it follows. A request the generator
//! marks with one of these is not sent to Redis (it would change what Redis holds, as
//! `FLUSHALL` or `SELECT 1` would); the proxy's reply must be the documented one.
//! Everything else must equal Redis's reply byte for byte, after [`normalize`].

/// Commands docs/redis-pools.md lists as refused (one of each reason), with arguments.
pub const REFUSED: &[&[&str]] = &[
    &["MULTI"],
    &["EXEC"],
    &["WATCH", "a"],
    &["SUBSCRIBE", "ch"],
    &["PUBLISH", "ch", "m"],
    &["BLPOP", "l", "0"],
    &["KEYS", "*"],
    &["SCAN", "0"],
    &["DBSIZE"],
    &["FLUSHALL"],
    &["FLUSHDB"],
    &["CONFIG", "GET", "save"],
    &["CLIENT", "LIST"],
    &["SCRIPT", "FLUSH"],
    &["OBJECT", "ENCODING", "a"],
    &["WAIT", "0", "0"],
];

/// Requests where Redis 7's own texts or reply shapes once differed from the proxy's
/// (findings of this fuzz, issue 33): `SELECT` of a malformed or negative number, `AUTH`
/// without a pool password, and a script's reply nested deeper than 32 arrays.
pub const REDIS_TEXTS: &[&[&str]] = &[
    &["SELECT", "x"],
    &["SELECT", "-1"],
    &["SELECT", "00"],
    &["AUTH", "pw"],
    &["AUTH", "a", "b", "c"],
    &[
        "EVAL",
        "local t = {} for i = 1, 40 do t = {t} end return t",
        "1",
        "k",
    ],
];

/// A documented difference: the proxy answers this request itself, not as Redis would.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Known {
    /// docs/redis-pools.md, "Refused, with the connection kept": commands no key
    /// routes get `-ERR <NAME> is not supported by cachelab-proxy: <why>`.
    Refused(String),
    /// Same rule, "scripting without keys": `EVAL`/`EVALSHA` with no keys.
    NoKeys(String),
    /// docs/redis-pools.md, "Answered by the proxy": `SELECT` of a database other than the pool's
    /// gets `-ERR SELECT <n>: this pool serves database 0 only`.
    OtherDb(String),
}

impl Known {
    /// The reply the rule documents, exactly (a refusal's reason is the proxy's own
    /// text, so only its start is fixed).
    pub fn accepts(&self, reply: &[u8]) -> bool {
        let one_line =
            reply.ends_with(b"\r\n") && reply.iter().filter(|b| **b == b'\n').count() == 1;
        let text = String::from_utf8_lossy(reply);
        one_line
            && match self {
                Known::Refused(name) => {
                    text.starts_with(&format!("-ERR {name} is not supported by cachelab-proxy: "))
                }
                Known::NoKeys(name) => {
                    text == format!(
                        "-ERR {name} without keys cannot be routed: name at least one key\r\n"
                    )
                }
                Known::OtherDb(db) => {
                    text == format!("-ERR SELECT {db}: this pool serves database 0 only\r\n")
                }
            }
    }

    /// What the rule expects, for a failure's message.
    pub fn describe(&self) -> String {
        match self {
            Known::Refused(name) => {
                format!("(rule) -ERR {name} is not supported by cachelab-proxy: ...")
            }
            Known::NoKeys(name) => format!("(rule) -ERR {name} without keys cannot be routed: ..."),
            Known::OtherDb(db) => {
                format!("(rule) -ERR SELECT {db}: this pool serves database 0 only")
            }
        }
    }
}

/// Replies as compared. With `clock` (an unmutated `TTL` or `PTTL`), a positive integer
/// reply is masked: the time left depends on when each server was asked, not on the
/// proxy (`-1` and `-2`, no expiry and no key, stay). Nothing else is masked.
pub fn normalize(reply: &[u8], clock: bool) -> Vec<u8> {
    let positive = reply.len() > 3
        && reply[0] == b':'
        && reply[1] != b'-'
        && reply[1] != b'0'
        && reply.ends_with(b"\r\n");
    if clock && positive {
        b":#\r\n".to_vec()
    } else {
        reply.to_vec()
    }
}
