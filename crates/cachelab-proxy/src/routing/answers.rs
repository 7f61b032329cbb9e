//! Whether a server's reply can be the answer to the request it was read for. A reply
//! read out of step (left over from another request on the same server connection)
//! must never reach a client, so a retrieval reply whose values name keys the request
//! did not ask for is taken as proof that the connection is out of step.

use cachelab_protocol::ValueIter;

/// True if every value in `body` (a retrieval reply before its `END`, with `hits`
/// values) is for a key that the `get`/`gets` request `frame` asked for.
pub fn values_answer_request(frame: &[u8], body: &[u8], hits: u32) -> bool {
    let line_end = memchr::memchr(b'\r', frame).unwrap_or(frame.len());
    let mut keys = frame[..line_end]
        .split(|b| *b == b' ')
        .filter(|t| !t.is_empty())
        .skip(1);
    let mut values = ValueIter::new(body);
    match (keys.next(), keys.clone().next()) {
        // One key and one value (the common case): its header, which starts the body,
        // names the key.
        (Some(key), None) if hits == 1 && names_first(body, key) => true,
        // One key: every value is for it.
        (Some(key), None) => values.all(|v| v.key == key),
        (Some(first), Some(_)) => {
            values.all(|v| v.key == first || keys.clone().any(|k| k == v.key))
        }
        (None, _) => body.is_empty(),
    }
}

/// The body's first value header is `VALUE <key> `, in memcached's spelling.
fn names_first(body: &[u8], key: &[u8]) -> bool {
    body.strip_prefix(b"VALUE ")
        .and_then(|rest| rest.strip_prefix(key))
        .is_some_and(|rest| rest.first() == Some(&b' '))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_for_the_key_asked_for_answers_the_request() {
        assert!(values_answer_request(
            b"get a\r\n",
            b"VALUE a 0 1\r\nx\r\n",
            1
        ));
        assert!(values_answer_request(b"gets a\r\n", b"", 0));
    }

    #[test]
    fn a_value_for_another_key_is_someone_elses_reply() {
        assert!(!values_answer_request(
            b"get a\r\n",
            b"VALUE b 0 1\r\nx\r\n",
            1
        ));
        assert!(!values_answer_request(
            b"get a b\r\n",
            b"VALUE a 0 1\r\nx\r\nVALUE c 0 1\r\ny\r\n",
            2
        ));
    }

    #[test]
    fn a_multi_get_may_be_answered_by_any_of_its_keys() {
        assert!(values_answer_request(
            b"get a b c\r\n",
            b"VALUE c 0 1\r\ny\r\nVALUE a 0 1\r\nx\r\n",
            2
        ));
    }

    #[test]
    fn a_key_that_only_starts_like_the_one_asked_for_is_another_key() {
        assert!(!values_answer_request(
            b"get a\r\n",
            b"VALUE ab 0 1\r\nx\r\n",
            1
        ));
        assert!(!values_answer_request(
            b"get ab\r\n",
            b"VALUE a 0 1\r\nx\r\n",
            1
        ));
    }

    #[test]
    fn a_header_spelt_differently_is_still_read_whole() {
        // Two spaces: not memcached's spelling, so the values are parsed.
        assert!(values_answer_request(
            b"get a\r\n",
            b"VALUE  a 0 1\r\nx\r\n",
            1
        ));
        // One key answered twice: every value must be for it.
        assert!(!values_answer_request(
            b"get a\r\n",
            b"VALUE a 0 1\r\nx\r\nVALUE b 0 1\r\ny\r\n",
            2
        ));
    }
}
