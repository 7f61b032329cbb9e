//! Commands as RESP arrays of bulk strings: `*<n>\r\n` then `$<len>\r\n<bytes>\r\n` each.

use bytes::BufMut;

/// Writes `*<n>\r\n`, the header of an array of `n` elements.
pub fn put_array_header(out: &mut impl BufMut, n: usize) {
    out.put_u8(b'*');
    out.put_slice(itoa::Buffer::new().format(n).as_bytes());
    out.put_slice(b"\r\n");
}

/// Writes one bulk string. Bulk strings are length-prefixed, so `bytes` may hold anything,
/// `\r\n` included.
pub fn put_bulk(out: &mut impl BufMut, bytes: &[u8]) {
    out.put_u8(b'$');
    out.put_slice(itoa::Buffer::new().format(bytes.len()).as_bytes());
    out.put_slice(b"\r\n");
    out.put_slice(bytes);
    out.put_slice(b"\r\n");
}

/// Writes any command: its name and arguments as one array of bulk strings.
pub fn compose_command(out: &mut impl BufMut, args: &[&[u8]]) {
    put_array_header(out, args.len());
    for arg in args {
        put_bulk(out, arg);
    }
}

/// `SET key value`; answered by `+OK`.
pub fn compose_set(out: &mut impl BufMut, key: &[u8], value: &[u8]) {
    compose_command(out, &[b"SET", key, value]);
}

/// `GET key`; answered by a bulk string, or the null bulk string on a miss.
pub fn compose_get(out: &mut impl BufMut, key: &[u8]) {
    compose_command(out, &[b"GET", key]);
}

/// `MGET key...`; answered by an array with one bulk string (or null) per key, in order.
/// The keys are iterated twice (count, then write) so that callers can pass a cheap
/// iterator over borrowed keys without collecting them.
pub fn compose_mget<'a, I>(out: &mut impl BufMut, keys: I)
where
    I: IntoIterator<Item = &'a [u8]>,
    I::IntoIter: Clone,
{
    let keys = keys.into_iter();
    put_array_header(out, 1 + keys.clone().count());
    put_bulk(out, b"MGET");
    for key in keys {
        put_bulk(out, key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_is_an_array_of_three_bulk_strings() {
        let mut out = Vec::new();
        compose_set(&mut out, b"k1", b"hello");
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$2\r\nk1\r\n$5\r\nhello\r\n");
    }

    #[test]
    fn get_is_an_array_of_two_bulk_strings() {
        let mut out = Vec::new();
        compose_get(&mut out, b"key");
        assert_eq!(out, b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n");
    }

    #[test]
    fn mget_counts_its_keys_in_the_array_header() {
        let mut out = Vec::new();
        compose_mget(&mut out, [&b"a"[..], b"bc", b"d"]);
        assert_eq!(
            out,
            b"*4\r\n$4\r\nMGET\r\n$1\r\na\r\n$2\r\nbc\r\n$1\r\nd\r\n".to_vec()
        );
    }

    #[test]
    fn values_are_binary_safe_and_may_be_empty() {
        let mut out = Vec::new();
        compose_set(&mut out, b"k", b"\r\n$-1\r\n");
        assert!(out.ends_with(b"$7\r\n\r\n$-1\r\n\r\n"));
        out.clear();
        compose_set(&mut out, b"k", b"");
        assert!(out.ends_with(b"$0\r\n\r\n"));
    }
}
