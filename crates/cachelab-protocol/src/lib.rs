//! The memcached text protocol, without I/O.
//!
//! Everything here works on byte slices and writes into caller-owned buffers, so the
//! middleware, the load generator and the tests share one parser and can exercise it
//! without sockets.
//!
//! - [`request`]: [`parse_request`] turns the front of a buffer into a borrowed
//!   [`Request`] and the number of bytes it used, or says the buffer is
//!   [`ParseError::Incomplete`], or rejects it with an [`Invalid`] that tells the caller
//!   which error line to send and how many bytes to discard so the connection stays usable.
//!   [`Request::compose`] writes a request back out.
//! - [`response`]: [`parse_reply`] reads one server reply, given the kind of request it
//!   answers (a proxy always knows that), without copying it.
//! - [`limits`]: the explicit limits (key length, value size, line length).
//! - [`binary`]: the memcached binary protocol's GET, multi-GET and SET, for load.
//! - [`resp`]: the Redis protocol (RESP2): SET/GET/MGET composed as arrays of bulk
//!   strings, and replies summarised without copying by [`parse_resp_reply`].

pub mod binary;
pub mod error;
pub mod limits;
mod line;
mod number;
pub mod request;
pub mod resp;
pub mod response;

pub use error::{Discard, Invalid, ParseError, RequestError, Span, Unlink};
pub use limits::Limits;
pub use request::{
    parse_request, parse_request_to, Arith, ArithOp, Delete, FlushAll, Get, Keys, Meta, MetaCmd,
    MetaStatus, Request, Store, StoreOp, Touch,
};
pub use resp::{parse_resp_reply, RespReply, RespValue};
pub use response::{
    compose_stat, compose_value, parse_reply, Expect, Reply, ReplyError, ReplyScan, RespKind,
    ValueIter,
};
