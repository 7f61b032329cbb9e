use super::*;

fn parse(input: &[u8]) -> Result<(Request<'_>, usize), ParseError> {
    parse_request(input, &Limits::default())
}

fn rejected(input: &[u8]) -> Invalid {
    match parse(input) {
        Err(ParseError::Invalid(invalid)) => invalid,
        other => panic!("expected a rejection for {input:?}, got {other:?}"),
    }
}

#[test]
fn unknown_command_is_answered_with_error_and_the_line_is_dropped() {
    let inv = rejected(b"bogus a b\r\nget a\r\n");
    assert_eq!(inv.error.reply_line(), b"ERROR\r\n");
    assert_eq!(inv.consumed, 11);
    assert_eq!(inv.then, Discard::Nothing);
}

#[test]
fn commands_are_case_sensitive_like_memcached() {
    assert_eq!(rejected(b"GET a\r\n").error, RequestError::UnknownCommand);
}

#[test]
fn empty_line_is_an_error() {
    assert_eq!(rejected(b"\r\n").error, RequestError::EmptyLine);
    assert_eq!(rejected(b"   \r\n").error, RequestError::EmptyLine);
}

#[test]
fn bare_newline_is_rejected_and_only_that_line_is_dropped() {
    let inv = rejected(b"get a\nget b\r\n");
    assert_eq!(inv.error, RequestError::BareNewline);
    assert_eq!(inv.consumed, 6);
}

#[test]
fn line_without_newline_over_the_limit_is_dropped_through_the_next_newline() {
    let limits = Limits {
        max_line_len: 16,
        ..Limits::default()
    };
    let input = [b'x'; 40];
    let Err(ParseError::Invalid(inv)) = parse_request(&input, &limits) else {
        panic!("expected rejection");
    };
    assert_eq!(inv.error, RequestError::LineTooLong);
    assert_eq!(inv.consumed, 18);
    assert_eq!(inv.then, Discard::ThroughNewline);
}

#[test]
fn incomplete_line_waits_for_more() {
    assert_eq!(parse(b"get a"), Err(ParseError::Incomplete));
    assert_eq!(parse(b""), Err(ParseError::Incomplete));
}

#[test]
fn stats_version_quit_verbosity_parse() {
    assert_eq!(parse(b"stats\r\n"), Ok((Request::Stats(b""), 7)));
    assert_eq!(
        parse(b"stats  settings \r\n"),
        Ok((Request::Stats(b"settings"), 18))
    );
    assert_eq!(parse(b"version\r\n"), Ok((Request::Version, 9)));
    assert_eq!(parse(b"quit\r\n"), Ok((Request::Quit, 6)));
    assert_eq!(
        parse(b"verbosity 1 noreply\r\n"),
        Ok((Request::Verbosity { noreply: true }, 21))
    );
}

#[test]
fn a_command_shorter_than_two_bytes_is_error() {
    assert_eq!(rejected(b"x\r\n").error.reply_line(), b"ERROR\r\n");
    assert_eq!(rejected(b"\r\r\n").error.reply_line(), b"ERROR\r\n");
}

#[test]
fn an_http_request_line_closes_the_connection_without_a_reply() {
    for input in [
        &b"GET / HTTP/1.1\r\n"[..],
        b"HTTP/1.0\r\n",
        b"mxx HTTP/1.1\r\n",
        b"xx a b c d e f g h i j k l m n o p q r s t u HTTP/1.1 z\r\n",
    ] {
        let inv = rejected(input);
        assert_eq!(inv.error, RequestError::HttpRequest, "{input:?}");
        assert_eq!((inv.then, inv.reply()), (Discard::Close, None));
    }
}

#[test]
fn http_is_recognised_only_where_memcached_looks_for_it() {
    // A command memcached dispatches by its first letter, a last token past the
    // tokenizer's reach, or HTTP/ not last: ERROR, and the connection stays.
    for input in [
        &b"gxx HTTP/1.1\r\n"[..],
        b"sxx HTTP/1.1\r\n",
        b"GET / HTTP/1.1 x\r\n",
        b"xx a b c d e f g h i j k l m n o p q r s t u v HTTP/1.1 z\r\n",
    ] {
        assert_eq!(
            rejected(input).error,
            RequestError::UnknownCommand,
            "{input:?}"
        );
    }
}

#[test]
fn version_and_quit_ignore_their_arguments() {
    assert_eq!(parse(b"version x\r\n"), Ok((Request::Version, 11)));
    assert_eq!(parse(b"quit now\r\n"), Ok((Request::Quit, 10)));
}

#[test]
fn keys_with_control_characters_are_rejected() {
    assert_eq!(rejected(b"get a\tb\r\n").error, RequestError::BadKey);
    assert_eq!(rejected(b"get a\x7fb\r\n").error, RequestError::BadKey);
    assert_eq!(rejected(b"delete a\x01\r\n").error, RequestError::BadKey);
}

/// A NUL anywhere in a line is its own error, a `get`'s key included (the quick
/// reading of `get <key>` takes no key with a control byte, so it leaves these to the
/// check).
#[test]
fn a_nul_in_a_line_is_refused_whatever_the_command() {
    for line in [
        &b"get a\0b\r\n"[..],
        b"get \0\r\n",
        b"gets a \0\r\n",
        b"get\0a\r\n",
        b"set a\0 0 0 1\r\nx\r\n",
    ] {
        assert_eq!(rejected(line).error, RequestError::NulInLine, "{line:?}");
    }
}
