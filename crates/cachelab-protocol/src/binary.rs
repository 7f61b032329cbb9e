//! The memcached binary protocol, as far as a load generator needs it: GET, multi-key GET
//! (quiet GETKQs closed by a NOOP, so only hits answer and the NOOP says "done"), SET and
//! the other writes a replayed trace sends (ADD, REPLACE, APPEND, PREPEND, DELETE,
//! INCREMENT, DECREMENT) composed into a buffer, and responses read back without copying.
//!
//! Every packet is a 24-byte header (magic, opcode, key length, extras length, data type,
//! vbucket or status, total body length, opaque, CAS), then extras, key and value.

use bytes::BufMut;
use thiserror::Error;

pub const REQUEST_MAGIC: u8 = 0x80;
pub const RESPONSE_MAGIC: u8 = 0x81;
pub const HEADER_LEN: usize = 24;

pub const OP_GET: u8 = 0x00;
pub const OP_SET: u8 = 0x01;
pub const OP_ADD: u8 = 0x02;
pub const OP_REPLACE: u8 = 0x03;
pub const OP_DELETE: u8 = 0x04;
pub const OP_INCREMENT: u8 = 0x05;
pub const OP_DECREMENT: u8 = 0x06;
pub const OP_NOOP: u8 = 0x0a;
pub const OP_GETKQ: u8 = 0x0d;
pub const OP_APPEND: u8 = 0x0e;
pub const OP_PREPEND: u8 = 0x0f;

/// The expiry of an INCREMENT or DECREMENT that must not create a missing key: it then
/// answers "key not found", as the text protocol's `incr` does.
pub const ARITH_NO_CREATE: u32 = 0xffff_ffff;

pub const STATUS_OK: u16 = 0x0000;
pub const STATUS_KEY_NOT_FOUND: u16 = 0x0001;
pub const STATUS_KEY_EXISTS: u16 = 0x0002;
pub const STATUS_NOT_STORED: u16 = 0x0005;

/// A response header and where its parts are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    pub opcode: u8,
    pub status: u16,
    pub opaque: u32,
    pub key_len: usize,
    pub extras_len: usize,
    /// Header plus body: the bytes this response takes.
    pub len: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum BinaryError {
    #[error("incomplete response")]
    Incomplete,
    #[error("malformed binary response: {0}")]
    Malformed(&'static str),
}

fn header(
    out: &mut impl BufMut,
    opcode: u8,
    key_len: usize,
    extras_len: u8,
    body_len: usize,
    opaque: u32,
) {
    out.put_u8(REQUEST_MAGIC);
    out.put_u8(opcode);
    out.put_u16(key_len as u16);
    out.put_u8(extras_len);
    out.put_u8(0); // data type: raw bytes
    out.put_u16(0); // vbucket
    out.put_u32(body_len as u32);
    out.put_u32(opaque);
    out.put_u64(0); // CAS
}

/// GET of one key.
pub fn compose_get(out: &mut impl BufMut, key: &[u8], opaque: u32) {
    header(out, OP_GET, key.len(), 0, key.len(), opaque);
    out.put_slice(key);
}

/// A multi-key GET: one quiet GETKQ per key (answered only on a hit, with its key), then a
/// NOOP whose answer ends the batch.
pub fn compose_multi_get<'a>(
    out: &mut impl BufMut,
    keys: impl IntoIterator<Item = &'a [u8]>,
    opaque: u32,
) {
    for key in keys {
        header(out, OP_GETKQ, key.len(), 0, key.len(), opaque);
        out.put_slice(key);
    }
    header(out, OP_NOOP, 0, 0, 0, opaque);
}

/// SET with flags and expiry time in the extras.
pub fn compose_set(
    out: &mut impl BufMut,
    key: &[u8],
    flags: u32,
    exptime: u32,
    data: &[u8],
    opaque: u32,
) {
    compose_store(out, OP_SET, key, flags, exptime, data, opaque);
}

/// A storage command with flags and expiry in its extras: `opcode` is [`OP_SET`],
/// [`OP_ADD`] or [`OP_REPLACE`].
pub fn compose_store(
    out: &mut impl BufMut,
    opcode: u8,
    key: &[u8],
    flags: u32,
    exptime: u32,
    data: &[u8],
    opaque: u32,
) {
    header(
        out,
        opcode,
        key.len(),
        8,
        8 + key.len() + data.len(),
        opaque,
    );
    out.put_u32(flags);
    out.put_u32(exptime);
    out.put_slice(key);
    out.put_slice(data);
}

/// APPEND or PREPEND ([`OP_APPEND`], [`OP_PREPEND`]): no extras, the key and the data.
pub fn compose_concat(out: &mut impl BufMut, opcode: u8, key: &[u8], data: &[u8], opaque: u32) {
    header(out, opcode, key.len(), 0, key.len() + data.len(), opaque);
    out.put_slice(key);
    out.put_slice(data);
}

/// DELETE of one key.
pub fn compose_delete(out: &mut impl BufMut, key: &[u8], opaque: u32) {
    header(out, OP_DELETE, key.len(), 0, key.len(), opaque);
    out.put_slice(key);
}

/// INCREMENT or DECREMENT ([`OP_INCREMENT`], [`OP_DECREMENT`]) by `delta`; the extras
/// carry the delta, the initial value and the expiry ([`ARITH_NO_CREATE`]: no initial).
pub fn compose_arith(
    out: &mut impl BufMut,
    opcode: u8,
    key: &[u8],
    delta: u64,
    exptime: u32,
    opaque: u32,
) {
    header(out, opcode, key.len(), 20, 20 + key.len(), opaque);
    out.put_u64(delta);
    out.put_u64(0); // initial value
    out.put_u32(exptime);
    out.put_slice(key);
}

/// The response at the front of `buf`.
pub fn parse_response(buf: &[u8]) -> Result<Response, BinaryError> {
    if buf.len() < HEADER_LEN {
        return Err(BinaryError::Incomplete);
    }
    if buf[0] != RESPONSE_MAGIC {
        return Err(BinaryError::Malformed("not a response (magic byte)"));
    }
    let key_len = usize::from(u16::from_be_bytes([buf[2], buf[3]]));
    let extras_len = usize::from(buf[4]);
    let body = u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize;
    if key_len + extras_len > body {
        return Err(BinaryError::Malformed(
            "key and extras longer than the body",
        ));
    }
    let len = HEADER_LEN
        .checked_add(body)
        .ok_or(BinaryError::Malformed("body length"))?;
    if buf.len() < len {
        return Err(BinaryError::Incomplete);
    }
    Ok(Response {
        opcode: buf[1],
        status: u16::from_be_bytes([buf[6], buf[7]]),
        opaque: u32::from_be_bytes([buf[12], buf[13], buf[14], buf[15]]),
        key_len,
        extras_len,
        len,
    })
}

/// The answer to a multi-key GET at the front of `buf`: (hits, bytes), once its NOOP
/// has arrived. A response with an error status ends it as malformed.
pub fn parse_multi_get(buf: &[u8]) -> Result<(u32, usize), BinaryError> {
    let mut pos = 0;
    let mut hits = 0;
    loop {
        let r = parse_response(&buf[pos..])?;
        pos += r.len;
        match (r.opcode, r.status) {
            (OP_NOOP, _) => return Ok((hits, pos)),
            (OP_GETKQ, STATUS_OK) => hits += 1,
            _ => return Err(BinaryError::Malformed("unexpected response in a multi-get")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(opcode: u8, status: u16, key: &[u8], extras: &[u8], value: &[u8]) -> Vec<u8> {
        let mut out = vec![RESPONSE_MAGIC, opcode];
        out.extend_from_slice(&(key.len() as u16).to_be_bytes());
        out.push(extras.len() as u8);
        out.push(0);
        out.extend_from_slice(&status.to_be_bytes());
        out.extend_from_slice(&((key.len() + extras.len() + value.len()) as u32).to_be_bytes());
        out.extend_from_slice(&7u32.to_be_bytes());
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(extras);
        out.extend_from_slice(key);
        out.extend_from_slice(value);
        out
    }

    #[test]
    fn a_set_carries_flags_and_expiry_in_its_extras() {
        let mut out = Vec::new();
        compose_set(&mut out, b"key", 5, 60, b"value", 9);
        assert_eq!(out[0], REQUEST_MAGIC);
        assert_eq!(out[1], OP_SET);
        assert_eq!(&out[2..4], &[0, 3]);
        assert_eq!(out[4], 8);
        assert_eq!(
            u32::from_be_bytes(out[8..12].try_into().unwrap()),
            8 + 3 + 5
        );
        assert_eq!(u32::from_be_bytes(out[12..16].try_into().unwrap()), 9);
        assert_eq!(&out[24..28], &5u32.to_be_bytes());
        assert_eq!(&out[28..32], &60u32.to_be_bytes());
        assert_eq!(&out[32..], b"keyvalue");
    }

    #[test]
    fn delete_concat_and_arith_have_their_extras() {
        let mut out = Vec::new();
        compose_delete(&mut out, b"k", 0);
        assert_eq!((out[1], out[4], out.len()), (OP_DELETE, 0, HEADER_LEN + 1));
        out.clear();
        compose_concat(&mut out, OP_PREPEND, b"k", b"vv", 0);
        assert_eq!((out[1], out[4], out.len()), (OP_PREPEND, 0, HEADER_LEN + 3));
        assert_eq!(&out[HEADER_LEN..], b"kvv");
        out.clear();
        compose_arith(&mut out, OP_DECREMENT, b"k", 3, ARITH_NO_CREATE, 0);
        assert_eq!(
            (out[1], out[4], out.len()),
            (OP_DECREMENT, 20, HEADER_LEN + 21)
        );
        assert_eq!(&out[HEADER_LEN..HEADER_LEN + 8], &3u64.to_be_bytes());
        assert_eq!(&out[HEADER_LEN + 16..HEADER_LEN + 20], &[0xff; 4]);
    }

    #[test]
    fn a_multi_get_is_quiet_gets_closed_by_a_noop() {
        let mut out = Vec::new();
        compose_multi_get(&mut out, [&b"a"[..], &b"bc"[..]], 1);
        assert_eq!(out.len(), (24 + 1) + (24 + 2) + 24);
        assert_eq!(out[1], OP_GETKQ);
        assert_eq!(out[25 + 1], OP_GETKQ);
        assert_eq!(out[25 + 26 + 1], OP_NOOP);
    }

    #[test]
    fn responses_are_read_only_when_whole() {
        let hit = response(OP_GET, STATUS_OK, b"", &[0, 0, 0, 0], b"value");
        assert_eq!(parse_response(&hit[..23]), Err(BinaryError::Incomplete));
        assert_eq!(
            parse_response(&hit[..hit.len() - 1]),
            Err(BinaryError::Incomplete)
        );
        let r = parse_response(&hit).unwrap();
        assert_eq!(
            (r.status, r.len, r.extras_len, r.opaque),
            (STATUS_OK, hit.len(), 4, 7)
        );
        let miss = response(OP_GET, STATUS_KEY_NOT_FOUND, b"", &[], b"Not found");
        assert_eq!(parse_response(&miss).unwrap().status, STATUS_KEY_NOT_FOUND);
        let mut bad = miss.clone();
        bad[0] = 0x42;
        assert!(matches!(
            parse_response(&bad),
            Err(BinaryError::Malformed(_))
        ));
    }

    #[test]
    fn a_multi_get_answer_counts_hits_until_the_noop() {
        let mut buf = response(OP_GETKQ, STATUS_OK, b"a", &[0; 4], b"1");
        buf.extend(response(OP_GETKQ, STATUS_OK, b"c", &[0; 4], b"3"));
        assert_eq!(parse_multi_get(&buf), Err(BinaryError::Incomplete));
        buf.extend(response(OP_NOOP, STATUS_OK, b"", &[], b""));
        assert_eq!(parse_multi_get(&buf), Ok((2, buf.len())));
    }
}
