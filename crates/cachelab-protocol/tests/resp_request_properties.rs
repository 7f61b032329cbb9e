//! Property tests for the RESP2 request parser: commands composed as arrays or inline
//! read back unchanged using exactly their bytes, every strict prefix of a command asks
//! for more bytes, and arbitrary bytes never panic and always make progress.

use cachelab_protocol::resp::{
    compose_command, compose_inline, parse_command, RequestScan, RespLimits, RespParseError, Scan,
};
use proptest::prelude::*;

fn arguments() -> impl Strategy<Value = Vec<Vec<u8>>> {
    proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..8)
}

fn as_slices(args: &[Vec<u8>]) -> Vec<&[u8]> {
    args.iter().map(Vec::as_slice).collect()
}

fn read_back(bytes: &[u8]) -> (Vec<Vec<u8>>, usize) {
    let (command, used) = parse_command(bytes, &RespLimits::default()).unwrap();
    (command.args().iter().map(|a| a.to_vec()).collect(), used)
}

proptest! {
    #[test]
    fn an_array_command_reads_back_unchanged(args in arguments()) {
        let mut bytes = Vec::new();
        compose_command(&mut bytes, &as_slices(&args));
        prop_assert_eq!(read_back(&bytes), (args, bytes.len()));
    }

    #[test]
    fn an_inline_command_reads_back_unchanged(args in arguments()) {
        let mut bytes = Vec::new();
        compose_inline(&mut bytes, &as_slices(&args));
        prop_assert_eq!(read_back(&bytes), (args, bytes.len()));
    }

    #[test]
    fn a_parsed_command_composes_to_the_same_command(args in arguments()) {
        let mut inline = Vec::new();
        compose_inline(&mut inline, &as_slices(&args));
        let (command, _) = parse_command(&inline, &RespLimits::default()).unwrap();
        let mut array = Vec::new();
        command.compose(&mut array);
        prop_assert_eq!(read_back(&array), (args, array.len()));
    }

    #[test]
    fn every_strict_prefix_of_a_command_is_incomplete(args in arguments(), inline in any::<bool>()) {
        let mut bytes = Vec::new();
        if inline {
            compose_inline(&mut bytes, &as_slices(&args));
        } else {
            compose_command(&mut bytes, &as_slices(&args));
        }
        for cut in 0..bytes.len() {
            prop_assert_eq!(
                parse_command(&bytes[..cut], &RespLimits::default()),
                Err(RespParseError::Incomplete),
                "cut at {}", cut
            );
        }
    }

    #[test]
    fn pipelined_commands_are_read_one_at_a_time(first in arguments(), second in arguments()) {
        let mut bytes = Vec::new();
        compose_command(&mut bytes, &as_slices(&first));
        let boundary = bytes.len();
        compose_inline(&mut bytes, &as_slices(&second));
        let (one, used) = read_back(&bytes);
        prop_assert_eq!((one, used), (first, boundary));
        prop_assert_eq!(read_back(&bytes[boundary..]).0, second);
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_always_progress(
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
        small in any::<bool>(),
    ) {
        let limits = if small {
            RespLimits { max_args: 4, max_bulk_len: 16, max_inline_len: 32 }
        } else {
            RespLimits::default()
        };
        let mut rest = &bytes[..];
        while !rest.is_empty() {
            match parse_command(rest, &limits) {
                Ok((command, used)) => {
                    prop_assert!(used > 0 && used <= rest.len());
                    // Inline commands are bounded by their line, arrays by the count limit.
                    prop_assert!(command.is_inline() || command.args().len() <= limits.max_args);
                    prop_assert!(command.args().iter().all(|a| a.len() < rest.len()));
                    rest = &rest[used..];
                }
                Err(RespParseError::Incomplete) => break,
                Err(RespParseError::Invalid(invalid)) => {
                    prop_assert!(invalid.consumed > 0 && invalid.consumed <= rest.len());
                    // Redis closes the connection here; nothing after is read.
                    break;
                }
            }
        }
    }

    #[test]
    fn array_bytes_with_binary_arguments_are_never_inline(args in arguments()) {
        let mut bytes = Vec::new();
        compose_command(&mut bytes, &as_slices(&args));
        let (command, _) = parse_command(&bytes, &RespLimits::default()).unwrap();
        prop_assert!(!command.is_inline());
    }

    #[test]
    fn fed_in_any_pieces_the_scan_is_ready_exactly_when_the_parser_is(
        args in arguments(),
        inline in any::<bool>(),
        mutations in proptest::collection::vec((any::<prop::sample::Index>(), prop_oneof![
            Just(b'\r'), Just(b'\n'), Just(b'$'), Just(b'*'), Just(b'-'), Just(b'0'), Just(b'9'), any::<u8>()
        ]), 0..3),
        step in 1usize..12,
        small in any::<bool>(),
    ) {
        let limits = if small {
            RespLimits { max_args: 4, max_bulk_len: 16, max_inline_len: 32 }
        } else {
            RespLimits::default()
        };
        let mut bytes = Vec::new();
        if inline {
            compose_inline(&mut bytes, &as_slices(&args));
        } else {
            compose_command(&mut bytes, &as_slices(&args));
        }
        for (at, byte) in mutations {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        let mut scan = RequestScan::default();
        let mut held = 0;
        while held < bytes.len() {
            held = (held + step).min(bytes.len());
            let whole = parse_command(&bytes[..held], &limits);
            let ready = scan.advance(&bytes[..held], &limits) == Scan::Ready;
            prop_assert_eq!(ready, whole != Err(RespParseError::Incomplete), "at {}", held);
            if ready {
                break;
            }
        }
    }
}
