//! Where one memcached text request or reply ends, so bytes can be forwarded whole
//! without being decoded. Pure: bytes in, lengths out.

/// What a request's reply looks like, so the reply's end can be found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyShape {
    /// `get`/`gets`: `VALUE ...` blocks, then `END` (or an error line).
    Values,
    /// Everything else: one line.
    Line,
}

/// A request at the head of a client's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Forward `len` bytes; the reply has this shape.
    Forward { len: usize, shape: ReplyShape },
    /// A storage command whose byte count is not a number: answer it here and skip
    /// `len` bytes (its line; memcached then reads the data block as a command too).
    Bad { len: usize },
}

const STORAGE: [&[u8]; 6] = [b"set", b"add", b"replace", b"append", b"prepend", b"cas"];

fn line_end(b: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', b).map(|i| i + 1)
}

fn trim_line(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// The field at `index` of a space-separated line.
fn field(line: &[u8], index: usize) -> Option<&[u8]> {
    line.split(|c| *c == b' ')
        .filter(|f| !f.is_empty())
        .nth(index)
}

fn number(f: &[u8]) -> Option<usize> {
    std::str::from_utf8(f).ok()?.parse().ok()
}

/// The request at the head of `b`, or `None` until it is complete.
pub fn request(b: &[u8]) -> Option<Request> {
    let end = line_end(b)?;
    let line = trim_line(&b[..end]);
    let command = field(line, 0).unwrap_or_default();
    if STORAGE.contains(&command) {
        let Some(bytes) = field(line, 4).and_then(number) else {
            return Some(Request::Bad { len: end });
        };
        let len = end + bytes + 2;
        return (b.len() >= len).then_some(Request::Forward {
            len,
            shape: ReplyShape::Line,
        });
    }
    let shape = if command == b"get" || command == b"gets" {
        ReplyShape::Values
    } else {
        ReplyShape::Line
    };
    Some(Request::Forward { len: end, shape })
}

/// The length of the reply at the head of `b`, or `None` until it is complete.
pub fn reply(b: &[u8], shape: ReplyShape) -> Option<usize> {
    let mut at = 0;
    loop {
        let end = at + line_end(&b[at..])?;
        let line = trim_line(&b[at..end]);
        if shape == ReplyShape::Line || !line.starts_with(b"VALUE ") {
            return Some(end);
        }
        // VALUE <key> <flags> <bytes> [<cas>]
        let bytes = field(line, 3).and_then(number)?;
        at = end + bytes + 2;
        if at > b.len() {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn requests_end_where_their_data_blocks_do() {
        let set = b"set k 0 0 5\r\nhello\r\nget k\r\n";
        assert_eq!(
            request(set),
            Some(Request::Forward {
                len: 20,
                shape: ReplyShape::Line
            })
        );
        assert_eq!(
            request(&set[20..]),
            Some(Request::Forward {
                len: 7,
                shape: ReplyShape::Values
            })
        );
        assert_eq!(request(&set[..19]), None, "data block incomplete");
        assert_eq!(request(b"get k"), None, "line incomplete");
        assert_eq!(
            request(b"cas k 0 0 1 7\r\nx\r\n"),
            Some(Request::Forward {
                len: 18,
                shape: ReplyShape::Line
            })
        );
        assert_eq!(
            request(b"delete k\r\n"),
            Some(Request::Forward {
                len: 10,
                shape: ReplyShape::Line
            })
        );
        assert_eq!(request(b"set k 0 0 x\r\n"), Some(Request::Bad { len: 13 }));
    }

    #[test]
    fn a_values_reply_ends_after_end_and_a_line_reply_after_its_line() {
        let hit = b"VALUE k 0 5\r\nhello\r\nVALUE j 1 2 9\r\nhi\r\nEND\r\nSTORED\r\n";
        assert_eq!(reply(hit, ReplyShape::Values), Some(44));
        assert_eq!(reply(b"END\r\n", ReplyShape::Values), Some(5));
        assert_eq!(reply(b"SERVER_ERROR x\r\n", ReplyShape::Values), Some(16));
        assert_eq!(reply(b"STORED\r\nEND\r\n", ReplyShape::Line), Some(8));
        for cut in 0..44 {
            assert_eq!(reply(&hit[..cut], ReplyShape::Values), None, "cut at {cut}");
        }
    }

    /// Requests a client may send, each with the shape of its reply.
    fn any_request() -> impl Strategy<Value = (Vec<u8>, ReplyShape)> {
        let key = "[a-z0-9]{1,12}";
        prop_oneof![
            (key, proptest::collection::vec(any::<u8>(), 0..300)).prop_map(|(k, data)| {
                let mut r = format!("set {k} 0 0 {}\r\n", data.len()).into_bytes();
                r.extend_from_slice(&data);
                r.extend_from_slice(b"\r\n");
                (r, ReplyShape::Line)
            }),
            proptest::collection::vec(key, 1..4).prop_map(|keys| {
                (
                    format!("get {}\r\n", keys.join(" ")).into_bytes(),
                    ReplyShape::Values,
                )
            }),
            key.prop_map(|k| (format!("delete {k}\r\n").into_bytes(), ReplyShape::Line)),
        ]
    }

    /// Replies a server may send, for a request of the given shape.
    fn any_reply() -> impl Strategy<Value = (Vec<u8>, ReplyShape)> {
        prop_oneof![
            proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..3)
                .prop_map(|values| {
                    let mut r = Vec::new();
                    for (i, v) in values.iter().enumerate() {
                        r.extend_from_slice(format!("VALUE k{i} 0 {}\r\n", v.len()).as_bytes());
                        r.extend_from_slice(v);
                        r.extend_from_slice(b"\r\n");
                    }
                    r.extend_from_slice(b"END\r\n");
                    (r, ReplyShape::Values)
                }),
            Just((b"STORED\r\n".to_vec(), ReplyShape::Line)),
            Just((
                b"SERVER_ERROR out of memory\r\n".to_vec(),
                ReplyShape::Values
            )),
        ]
    }

    proptest! {
        /// Back to back, every request is found whole and in order, and a request cut
        /// short is never taken for a whole one.
        #[test]
        fn requests_split_where_they_were_joined(reqs in proptest::collection::vec(any_request(), 1..8)) {
            let stream: Vec<u8> = reqs.iter().flat_map(|(r, _)| r.clone()).collect();
            let mut at = 0;
            for (r, shape) in &reqs {
                prop_assert_eq!(request(&stream[at..]), Some(Request::Forward { len: r.len(), shape: *shape }));
                for cut in 0..r.len() {
                    prop_assert_eq!(request(&stream[at..at + cut]), None);
                }
                at += r.len();
            }
        }

        #[test]
        fn replies_split_where_they_were_joined(replies in proptest::collection::vec(any_reply(), 1..8)) {
            let stream: Vec<u8> = replies.iter().flat_map(|(r, _)| r.clone()).collect();
            let mut at = 0;
            for (r, shape) in &replies {
                prop_assert_eq!(reply(&stream[at..], *shape), Some(r.len()));
                for cut in 0..r.len() {
                    prop_assert_eq!(reply(&stream[at..at + cut], *shape), None);
                }
                at += r.len();
            }
        }
    }
}
