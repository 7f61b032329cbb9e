//! Numbers read as memcached 1.6.18 reads them (`util.c`: `safe_strtol`, `safe_strtoul`,
//! `safe_strtoull`), so the proxy accepts exactly the numeric tokens the server accepts,
//! and takes the same value from each.
//!
//! These are C's `strtol` family: white space and a sign may lead, at least one digit
//! follows, and the rest of the token must be empty or start with white space (`1\tx`
//! reads as 1). Then memcached's own quirks, which matter to a proxy because a request it
//! reads differently from the server is a request framed differently:
//! - `safe_strtol` keeps a 64-bit `long` and stores it into an `int32_t`, so
//!   `4294967298` reads as 2 (a data length of 2);
//! - `safe_strtoul` stores a 64-bit `unsigned long` into a `uint32_t` the same way;
//! - the unsigned readers take a minus sign as C does (negating modulo 2^64) and refuse
//!   it only when the result is negative as a signed number: `-0` is 0, `-1` is refused,
//!   and `-18446744073709551615` is 1.

/// C's `isspace` in the C locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// The number `strtol` and its kin read: its sign and magnitude (`None` past 2^64 - 1,
/// where C reports `ERANGE`), or `None` when the token is not a number to memcached
/// (no digits, or something other than white space right after them).
fn scan(token: &[u8]) -> Option<(bool, Option<u64>)> {
    let mut rest = token;
    while let Some((&b, tail)) = rest.split_first() {
        if !is_c_space(b) {
            break;
        }
        rest = tail;
    }
    let negative = match rest.first() {
        Some(b'-') => {
            rest = &rest[1..];
            true
        }
        Some(b'+') => {
            rest = &rest[1..];
            false
        }
        _ => false,
    };
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    match rest.get(digits) {
        Some(&b) if !is_c_space(b) => return None,
        _ => {}
    }
    let magnitude = rest[..digits].iter().try_fold(0u64, |acc, &d| {
        acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    });
    Some((negative, magnitude))
}

/// `safe_strtoull`: a 64-bit unsigned number (the cas unique, the incr/decr delta).
pub(crate) fn strtoull(token: &[u8]) -> Option<u64> {
    let (negative, magnitude) = scan(token)?;
    let magnitude = magnitude?;
    let value = if negative {
        magnitude.wrapping_neg()
    } else {
        magnitude
    };
    if (value as i64) < 0 && token.contains(&b'-') {
        return None;
    }
    Some(value)
}

/// `safe_strtoul` into a `uint32_t` (client flags, the verbosity level, slab ids).
pub(crate) fn strtoul32(token: &[u8]) -> Option<u32> {
    strtoull(token).map(|value| value as u32)
}

/// `safe_strtol` into an `int32_t` (expiration times, data lengths).
pub(crate) fn strtol32(token: &[u8]) -> Option<i32> {
    let (negative, magnitude) = scan(token)?;
    let magnitude = magnitude?;
    let value = if negative {
        0i64.checked_sub_unsigned(magnitude)?
    } else {
        i64::try_from(magnitude).ok()?
    };
    Some(value as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn white_space_and_a_sign_may_lead_and_white_space_may_follow() {
        assert_eq!(strtol32(b"+5"), Some(5));
        assert_eq!(strtol32(b"\t-5"), Some(-5));
        assert_eq!(strtol32(b"5\tjunk"), Some(5));
        assert_eq!(strtol32(b"5\r"), Some(5));
        assert_eq!(strtoull(b"+7"), Some(7));
    }

    #[test]
    fn a_token_without_digits_or_with_junk_after_them_is_no_number() {
        for token in [&b""[..], b"-", b"+", b"x1", b"1x", b"- 1", b"\t", b"0x10"] {
            assert_eq!(strtol32(token), None, "{token:?}");
            assert_eq!(strtoull(token), None, "{token:?}");
        }
    }

    #[test]
    fn signed_numbers_are_read_as_64_bits_and_kept_as_32() {
        assert_eq!(strtol32(b"4294967298"), Some(2));
        assert_eq!(strtol32(b"4294967295"), Some(-1));
        assert_eq!(strtol32(b"9223372036854775807"), Some(-1));
        assert_eq!(strtol32(b"-9223372036854775808"), Some(0));
        assert_eq!(strtol32(b"9223372036854775808"), None, "ERANGE");
        assert_eq!(strtol32(b"-9223372036854775809"), None, "ERANGE");
    }

    #[test]
    fn unsigned_numbers_refuse_a_minus_only_when_the_result_looks_negative() {
        assert_eq!(strtoull(b"-0"), Some(0));
        assert_eq!(strtoull(b"-1"), None);
        assert_eq!(strtoull(b"-18446744073709551615"), Some(1));
        assert_eq!(strtoull(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(strtoull(b"18446744073709551616"), None, "ERANGE");
        assert_eq!(
            strtoull(b"18446744073709551615\t-"),
            None,
            "any minus in the token counts"
        );
    }

    #[test]
    fn thirty_two_bit_unsigned_numbers_wrap_as_memcached_stores_them() {
        assert_eq!(strtoul32(b"4294967297"), Some(1));
        assert_eq!(strtoul32(b"18446744073709551615"), Some(u32::MAX));
        assert_eq!(strtoul32(b"-1"), None);
    }
}
