//! Explicit protocol limits, shared by every parser.

/// memcached's own key limit (`KEY_MAX_LENGTH`).
pub const MAX_KEY_LEN: usize = 250;
/// memcached's default item size limit (`-I 1m`).
pub const DEFAULT_MAX_VALUE_LEN: usize = 1024 * 1024;
/// A command line longer than this is rejected. Long enough for a multi-GET of 250 keys
/// of the maximum length; short enough that a client sending garbage without newlines
/// cannot make us buffer without bound.
pub const DEFAULT_MAX_LINE_LEN: usize = 64 * 1024;

/// memcached closes a connection whose command line passes this many bytes before its
/// newline has been read, unless the line is a `get` or `gets` (which may be longer). A
/// long line that arrives in one read is served, so what a client gets from memcached
/// depends on how its bytes were cut; a proxy must send servers no longer line of any
/// other command, or a client's bytes close the proxy's server connection.
pub const MEMCACHED_MAX_LINE: usize = 2048;

/// Limits a parser enforces. The defaults are memcached's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_key_len: usize,
    pub max_value_len: usize,
    pub max_line_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_key_len: MAX_KEY_LEN,
            max_value_len: DEFAULT_MAX_VALUE_LEN,
            max_line_len: DEFAULT_MAX_LINE_LEN,
        }
    }
}
