//! `get <key>*` and `gets <key>*` (and `bget`, memcached's ancient alias of `get`).

use bytes::BufMut;

use super::{check_key_bytes, check_key_length, want_min_tokens, Refused, Request};
use crate::limits::Limits;
use crate::line::{tokens, Words};

/// The keys of a retrieval request, kept as the original space-separated text so that
/// parsing allocates nothing; iterate with [`Keys::iter`].
#[derive(Debug, Clone, Copy)]
pub struct Keys<'a> {
    raw: &'a [u8],
    count: usize,
}

impl<'a> Keys<'a> {
    /// Keys from space-separated text; the caller vouches that each key is valid.
    pub fn from_raw(raw: &'a [u8]) -> Self {
        Keys {
            raw,
            count: tokens(raw).count(),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &'a [u8]> + Clone {
        tokens(self.raw)
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

impl PartialEq for Keys<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.count == other.count && self.iter().eq(other.iter())
    }
}

impl Eq for Keys<'_> {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Get<'a> {
    pub keys: Keys<'a>,
    /// `gets`: the reply carries each value's cas unique.
    pub cas: bool,
}

impl Get<'_> {
    pub fn compose(&self, out: &mut impl BufMut) {
        out.put_slice(if self.cas { b"gets" } else { b"get" });
        for key in self.keys.iter() {
            out.put_u8(b' ');
            out.put_slice(key);
        }
        out.put_slice(b"\r\n");
    }
}

/// memcached wants at least one key (else `ERROR`), and answers a key over the limit
/// anywhere in the list with `CLIENT_ERROR bad command line format` alone, whatever it
/// found for the keys before it. The proxy's own key rule comes after.
pub(super) fn parse<'a>(
    words: &Words<'a>,
    args: &'a [u8],
    cas: bool,
    limits: &Limits,
) -> Result<Request<'a>, Refused> {
    want_min_tokens(words, 3)?;
    let mut count = 0;
    for key in tokens(args) {
        check_key_length(key, limits)?;
        count += 1;
    }
    for key in tokens(args) {
        check_key_bytes(key)?;
    }
    Ok(Request::Get(Get {
        keys: Keys { raw: args, count },
        cas,
    }))
}

/// `get <key>` in memcached's spelling (one space, one key that every rule accepts),
/// read without tokenizing the line: the request nearly every client sends most, made
/// cheap. None for any other line, which the general parser reads (with the same
/// result for this one).
pub(super) fn quick_get<'a>(line: &'a [u8], limits: &Limits) -> Option<Request<'a>> {
    let key = line.strip_prefix(b"get ")?;
    let fine = !key.is_empty() && super::check_key(key, limits).is_ok();
    fine.then_some(Request::Get(Get {
        keys: Keys { raw: key, count: 1 },
        cas: false,
    }))
}

#[cfg(test)]
mod tests {
    use crate::{parse_request, Limits, ParseError, Request, RequestError};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

        /// Whatever the line, the quick reading of `get <key>` is the general parser's.
        #[test]
        fn the_quick_get_is_the_general_parsers_get(
            line in proptest::collection::vec(
                prop_oneof![
                    Just(b"get".to_vec()), Just(b"gets".to_vec()), Just(b" ".to_vec()),
                    Just(b"  ".to_vec()), Just(vec![b'k'; 251]), Just(vec![0x7f]),
                    Just(vec![0x01]), Just(b"\t".to_vec()), "[a-z0-9]{1,8}".prop_map(String::into_bytes),
                ],
                0..6,
            ).prop_map(|parts| parts.concat()),
        ) {
            let limits = Limits::default();
            if let Some(quick) = super::quick_get(&line, &limits) {
                let mut framed = line.clone();
                framed.extend_from_slice(b"\r\n");
                let general = super::super::parse_line(&framed, &line, framed.len(), &limits);
                prop_assert_eq!(general, Ok((quick, framed.len())));
            }
        }
    }

    fn keys_of(input: &[u8]) -> (Vec<Vec<u8>>, bool) {
        match parse_request(input, &Limits::default()) {
            Ok((Request::Get(g), n)) => {
                assert_eq!(n, input.len());
                (g.keys.iter().map(<[u8]>::to_vec).collect(), g.cas)
            }
            other => panic!("{other:?}"),
        }
    }

    fn error_of(input: &[u8]) -> RequestError {
        match parse_request(input, &Limits::default()) {
            Err(ParseError::Invalid(inv)) => inv.error,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_plain_get_is_read_quickly_and_any_other_spelling_by_the_general_parser() {
        let limits = Limits::default();
        assert!(super::quick_get(b"get foo", &limits).is_some());
        for line in [
            &b"get  foo"[..],
            b"get foo ",
            b"get a b",
            b"gets foo",
            b"get ",
        ] {
            assert!(super::quick_get(line, &limits).is_none(), "{line:?}");
        }
        assert!(super::quick_get(&[b"get ".as_slice(), &[b'k'; 251]].concat(), &limits).is_none());
    }

    #[test]
    fn get_takes_one_key() {
        assert_eq!(keys_of(b"get foo\r\n"), (vec![b"foo".to_vec()], false));
    }

    #[test]
    fn multi_get_keeps_the_clients_key_order() {
        let (keys, _) = keys_of(b"get c a b\r\n");
        assert_eq!(keys, vec![b"c".to_vec(), b"a".to_vec(), b"b".to_vec()]);
    }

    #[test]
    fn gets_asks_for_cas_uniques() {
        assert!(keys_of(b"gets foo bar\r\n").1);
    }

    #[test]
    fn get_without_a_key_is_error_as_in_memcached() {
        for input in [&b"get\r\n"[..], b"get   \r\n", b"gets\r\n", b"bget\r\n"] {
            assert_eq!(error_of(input), RequestError::UnknownCommand);
        }
    }

    #[test]
    fn bget_is_get() {
        assert_eq!(
            keys_of(b"bget a b\r\n"),
            (vec![b"a".to_vec(), b"b".to_vec()], false)
        );
    }

    #[test]
    fn key_of_250_bytes_is_accepted_and_251_rejected() {
        let mut ok = b"get ".to_vec();
        ok.extend([b'k'; 250]);
        ok.extend(b"\r\n");
        assert_eq!(keys_of(&ok).0[0].len(), 250);
        let mut long = b"get ".to_vec();
        long.extend([b'k'; 251]);
        long.extend(b"\r\n");
        assert_eq!(error_of(&long), RequestError::KeyTooLong);
    }

    #[test]
    fn one_long_key_anywhere_rejects_the_whole_multi_get_with_one_line() {
        let mut line = b"get".to_vec();
        for i in 0..40 {
            line.extend(format!(" k{i}").bytes());
        }
        line.push(b' ');
        line.extend([b'k'; 251]);
        line.extend(b" b\r\n");
        assert_eq!(error_of(&line), RequestError::KeyTooLong);
        let Err(ParseError::Invalid(inv)) = parse_request(&line, &Limits::default()) else {
            panic!()
        };
        assert_eq!(
            inv.error.reply_line(),
            b"CLIENT_ERROR bad command line format\r\n"
        );
        assert_eq!(inv.consumed, line.len());
    }

    #[test]
    fn a_long_key_is_memcacheds_error_even_after_a_key_with_a_control_character() {
        let mut line = b"get a\x01 ".to_vec();
        line.extend([b'k'; 251]);
        line.extend(b"\r\n");
        assert_eq!(error_of(&line), RequestError::KeyTooLong);
    }

    #[test]
    fn key_is_binary_safe_above_0x7f() {
        let (keys, _) = keys_of(b"get \xc3\xa9t\xc3\xa9\r\n");
        assert_eq!(keys[0], "été".as_bytes());
    }
}
