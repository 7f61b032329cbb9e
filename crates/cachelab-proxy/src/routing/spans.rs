//! Where each key of a multi-key request sits in its frame, found once when the
//! request is decoded, so that routing (a shard pool's placement of every key), the
//! composition of each part and the by-key merge of the replies read the keys without
//! parsing the request again (twemproxy records key positions at parse time too).

/// The keys of one request frame as (start, length) byte ranges of that frame; empty
/// for a request with fewer than two keys, which routing reads from the frame itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeySpans(Vec<(u32, u32)>);

impl KeySpans {
    /// The spans of `keys`, each a subslice of `frame` (as a parser's borrowed keys
    /// are); a key outside `frame` is a caller's bug.
    pub fn of<'a>(frame: &'a [u8], keys: impl Iterator<Item = &'a [u8]>) -> KeySpans {
        let base = frame.as_ptr() as usize;
        KeySpans(
            keys.map(|key| {
                let start = (key.as_ptr() as usize)
                    .checked_sub(base)
                    .filter(|s| s + key.len() <= frame.len())
                    .expect("a key is a part of its frame");
                (start as u32, key.len() as u32)
            })
            .collect(),
        )
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The `i`-th span's bytes, read from the frame the spans were taken of.
    pub fn get<'f>(&self, frame: &'f [u8], i: usize) -> Option<&'f [u8]> {
        self.0
            .get(i)
            .map(|&(start, len)| &frame[start as usize..(start + len) as usize])
    }

    /// The keys, read from the frame the spans were taken of.
    pub fn keys<'s, 'f: 's>(
        &'s self,
        frame: &'f [u8],
    ) -> impl Iterator<Item = &'f [u8]> + Clone + 's {
        self.0
            .iter()
            .map(move |&(start, len)| &frame[start as usize..(start + len) as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cachelab_protocol::{parse_request, Limits, Request};

    fn spans_of(frame: &[u8]) -> KeySpans {
        let Ok((Request::Get(get), _)) = parse_request(frame, &Limits::default()) else {
            panic!("not a get");
        };
        KeySpans::of(frame, get.keys.iter())
    }

    #[test]
    fn the_keys_read_back_are_the_parsers_keys_whatever_the_spacing() {
        let frame = b"get  a   bb ccc  dddd \r\n";
        let spans = spans_of(frame);
        let keys: Vec<&[u8]> = spans.keys(frame).collect();
        let Ok((Request::Get(get), _)) = parse_request(frame, &Limits::default()) else {
            unreachable!()
        };
        assert_eq!(keys, get.keys.iter().collect::<Vec<_>>());
        assert_eq!(spans.len(), keys.len());
    }

    #[test]
    fn spans_are_positions_in_the_frame() {
        let frame = b"gets k1 k22\r\n";
        assert_eq!(spans_of(frame), KeySpans(vec![(5, 2), (8, 3)]));
    }

    #[test]
    #[should_panic(expected = "a key is a part of its frame")]
    fn a_key_from_elsewhere_is_refused() {
        let other = b"x".to_vec();
        KeySpans::of(b"get a\r\n", std::iter::once(&other[..]));
    }
}
