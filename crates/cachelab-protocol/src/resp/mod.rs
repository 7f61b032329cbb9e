//! The Redis serialization protocol, version 2 (RESP2), without I/O.
//!
//! Commands go to the server as arrays of bulk strings ([`compose_set`], [`compose_get`],
//! [`compose_mget`], or [`compose_command`] for any other); replies come back as one of
//! five types, which [`parse_resp_reply`] summarises without copying. Unlike the memcached
//! text protocol, RESP is self-describing, so parsing a reply needs no knowledge of the
//! request it answers.
//!
//! A proxy reads its clients' commands with [`parse_command`], which frames arrays of
//! bulk strings and inline commands exactly as Redis does, with explicit
//! [`RespLimits`] and Redis's own protocol error texts ([`RespRequestError`]).
//!
//! The reply parser's errors are the memcached side's [`ReplyError`](crate::ReplyError):
//! `Incomplete` asks for more bytes, `Malformed` means the stream can no longer be
//! trusted to be in step.

mod compose;
mod reply;
mod request;
mod request_scan;

pub use compose::{
    compose_command, compose_get, compose_mget, compose_set, put_array_header, put_bulk,
};
pub use reply::{
    compose_resp_value, parse_resp_reply, RespElements, RespReply, RespValue, MAX_BULK_LEN,
    MAX_DEPTH,
};
pub use request::string2ll;
pub use request::{
    compose_inline, parse_command, Command, RespInvalid, RespLimits, RespParseError,
    RespRequestError, DEFAULT_MAX_ARGS, MAX_INLINE_LEN,
};
pub use request_scan::{RequestScan, Scan};
