//! Exact parsing of the plain decimals Angel's text formats are made of (`-804.923975`),
//! without the general algorithm: most values of a text partition are `[-]digits.digits` with
//! few digits, and `str::parse` spends most of its time deciding that they are.
//!
//! Clinger's fast path: a mantissa `m < 2^53` and a power `10^k` with `k ≤ 22` are both exact
//! f64s, so `m / 10^k` is one correctly rounded IEEE division — the f64 nearest the decimal.
//! Everything else (exponents, `NaN`, `Infinity`, long mantissas, `.5`, `5.`) returns `None`
//! and the caller falls back to `str::parse`, so what is accepted and what is produced are
//! exactly `str::parse`'s.

/// 10^0 ..= 10^22, every one an exact f64.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// The f64s nearest 10^-0 ..= 10^-22 (inexact from 10^-1 on).
const POW10_INV: [f64; 23] = [
    1e0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11, 1e-12, 1e-13, 1e-14,
    1e-15, 1e-16, 1e-17, 1e-18, 1e-19, 1e-20, 1e-21, 1e-22,
];

/// 10^0 ..= 10^8.
const POW10_U64: [u64; 9] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
];

/// The digits at the start of `s` among its first eight bytes (`None` when `s` is shorter):
/// their count and value, read as one word (as fast_float does) instead of byte by byte.
#[inline]
fn digits8(s: &[u8]) -> Option<(usize, u64)> {
    let w = u64::from_le_bytes(*s.first_chunk::<8>()?);
    // A byte is a digit when its high nibble is 3 and stays 3 with 6 added. A carry out of a
    // byte >= 0xfa only disturbs the bytes after it, which follow a non-digit anyway.
    const HIGH: u64 = 0xf0f0_f0f0_f0f0_f0f0;
    const THREES: u64 = 0x3030_3030_3030_3030;
    let other = ((w & HIGH) ^ THREES) | ((w.wrapping_add(0x0606_0606_0606_0606) & HIGH) ^ THREES);
    let n = (other.trailing_zeros() / 8) as usize;
    if n == 0 {
        return Some((0, 0));
    }
    Some((n, first_digits(w, n)))
}

/// The value of the first `n` (1..=8) bytes of `w` (in memory order), which must be ASCII
/// digits; the bytes after them may be anything.
#[inline(always)]
pub(super) fn first_digits(w: u64, n: usize) -> u64 {
    debug_assert!((1..=8).contains(&n));
    const THREES: u64 = 0x3030_3030_3030_3030;
    // The n digit values moved to the top bytes (leading zeros below); borrows out of the
    // bytes after them only reach bytes shifted out.
    let d = w.wrapping_sub(THREES) << (8 * (8 - n));
    // Pairs, then fours, then all eight: byte 0 is the most significant digit.
    let d = d.wrapping_mul(10).wrapping_add(d >> 8);
    const MASK: u64 = 0x0000_00ff_0000_00ff;
    const MUL1: u64 = 100 + (1_000_000 << 32);
    const MUL2: u64 = 1 + (10_000 << 32);
    ((d & MASK).wrapping_mul(MUL1)).wrapping_add(((d >> 16) & MASK).wrapping_mul(MUL2)) >> 32
}

/// The digits at the start of `s` when there are fewer than 16 and a non-digit follows them
/// within `s`'s first 16 bytes: their count and value. `None` leaves `s` to a byte-at-a-time
/// read (a short tail, a long number).
#[inline]
pub(crate) fn leading_digits(s: &[u8]) -> Option<(usize, u64)> {
    let (n, v) = digits8(s)?;
    if n < 8 {
        return Some((n, v));
    }
    match digits8(&s[8..])? {
        (8, _) => None,
        (n, w) => Some((8 + n, v * POW10_U64[n] + w)),
    }
}

/// The f64 nearest the decimal `field` when it is `[-]digits[.digits]` with at most 19
/// digits and a mantissa below 2^53; `None` otherwise.
#[inline]
pub(crate) fn simple_f64(field: &[u8]) -> Option<f64> {
    simple_f64_prefix(field)
        .filter(|&(_, n)| n == field.len())
        .map(|(v, _)| v)
}

/// `simple_f64` of the longest prefix of `data` shaped `[-]digits[.digits]`, and its length:
/// a value read straight out of a line, where it ends being the caller's to check.
#[inline]
pub(crate) fn simple_f64_prefix(data: &[u8]) -> Option<(f64, usize)> {
    let (neg, m, k, len) = plain_decimal(data)?;
    Some((f64_of(neg, m, k)?, len))
}

/// The f64 nearest `(-1)^neg m 10^-k`: `None` unless `m < 2^53` and `k <= 22`.
#[inline]
pub(crate) fn f64_of(neg: bool, m: u64, k: usize) -> Option<f64> {
    if m >= 1 << 53 {
        return None;
    }
    // `m < 2^53`: exact, by the one-instruction signed conversion.
    let v = m as i64 as f64 / POW10.get(k)?;
    Some(if neg { -v } else { v })
}

/// The longest prefix of `data` shaped `[-]digits[.digits]` with at most 19 digits and a
/// mantissa below 2^53: its sign, mantissa, fraction digits and length.
#[inline]
fn plain_decimal(data: &[u8]) -> Option<(bool, u64, usize, usize)> {
    let neg = data.first() == Some(&b'-');
    let mut i = neg as usize;
    // Wrapping: a mantissa of more than 19 digits is refused below, whatever it wrapped to.
    let mut m: u64 = 0;
    let digits_from = |mut i: usize, m: &mut u64| {
        // Eight at a time while eight bytes are there, then one at a time.
        while let Some((n, v)) = data.get(i..).and_then(digits8) {
            *m = m.wrapping_mul(POW10_U64[n]).wrapping_add(v);
            i += n;
            if n < 8 {
                return i;
            }
        }
        while let Some(d) = data
            .get(i)
            .map(|b| b.wrapping_sub(b'0'))
            .filter(|&d| d <= 9)
        {
            *m = m.wrapping_mul(10).wrapping_add(d as u64);
            i += 1;
        }
        i
    };
    let int_end = digits_from(i, &mut m);
    let int_digits = int_end - i;
    i = int_end;
    let mut k = 0;
    if data.get(i) == Some(&b'.') {
        let frac_end = digits_from(i + 1, &mut m);
        k = frac_end - (i + 1);
        i = frac_end;
        // "5." is left to str::parse (which takes it).
        if k == 0 {
            return None;
        }
    }
    // ".5" and "" likewise.
    if int_digits == 0 || int_digits + k > 19 || m >= 1 << 53 {
        return None;
    }
    Some((neg, m, k, i))
}

/// The f32 nearest the decimal `field`, when `simple_f64` reads it and rounding its f64 again
/// to f32 cannot differ from rounding the decimal once.
#[inline]
pub(crate) fn simple_f32(field: &[u8]) -> Option<f32> {
    simple_f32_prefix(field)
        .filter(|&(_, n)| n == field.len())
        .map(|(v, _)| v)
}

/// `simple_f32` of the longest prefix of `data` shaped `[-]digits[.digits]`, and its length.
#[inline]
pub(crate) fn simple_f32_prefix(data: &[u8]) -> Option<(f32, usize)> {
    let (neg, m, k, n) = plain_decimal(data)?;
    Some((f32_of(neg, m, k)?, n))
}

/// The f32 nearest `(-1)^neg m 10^-k`; `None` unless `m < 2^53` and `k <= 22`, and when it
/// is left to `str::parse` (below).
#[inline]
pub(crate) fn f32_of(neg: bool, m: u64, k: usize) -> Option<f32> {
    if m >= 1 << 53 || k >= POW10.len() {
        return None;
    }
    // `m < 2^53`: exact as an f64 (and a signed conversion is one instruction).
    let m = m as i64 as f64;
    // A product with the f64 nearest 10^-k instead of Clinger's division (a fraction of its
    // latency): within 2 ulps of the decimal (two roundings of 2^-53 each), so it rounds to
    // the decimal's nearest f32 unless an f32 midpoint lies within 2 ulps of it. Any f32
    // midpoint is an f64 whose low 29 of 52 fraction bits are 1 then zeros; a product that
    // close to one (8 ulps: margin for a binade edge) takes the division, which is the f64
    // nearest the decimal and rounds twice unlike once only when it lands on a midpoint.
    let near = |d: f64| (d.to_bits() & 0x1FFF_FFFF).abs_diff(0x1000_0000) <= 8;
    let mut d = m * POW10_INV[k];
    if near(d) {
        d = m / POW10[k];
        if d.to_bits() & 0x1FFF_FFFF == 0x1000_0000 {
            return None;
        }
    }
    // Subnormal and overflowing f32s have other midpoints: left to str::parse. The product
    // may stand for the decimal in this test: within 2 ulps of a bound (an f32, not a
    // midpoint) both round to the bound.
    let a = d.abs();
    if a != 0.0 && !((f32::MIN_POSITIVE as f64)..=(f32::MAX as f64)).contains(&a) {
        return None;
    }
    let v = d as f32;
    Some(if neg { -v } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn same_f32(s: &str) {
        if let Some(v) = simple_f32(s.as_bytes()) {
            let want: f32 = s.parse().unwrap();
            assert_eq!(v.to_bits(), want.to_bits(), "{s}");
        }
    }

    fn same_f64(s: &str) {
        if let Some(v) = simple_f64(s.as_bytes()) {
            let want: f64 = s.parse().unwrap();
            assert_eq!(v.to_bits(), want.to_bits(), "{s}");
        }
    }

    #[test]
    fn eight_digits_at_a_time_read_like_one_at_a_time() {
        let mut s: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..200_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            // Mostly digits, some of every other byte (incl. >= 0xfa and '/' ':' around digits).
            let mut b = [0u8; 8];
            for (k, x) in b.iter_mut().enumerate() {
                let r = (s >> (8 * k)) as u8;
                *x = match r % 8 {
                    0 => r,
                    1 => [b'/', b':', 0xfa, 0xff, b'.', b'\n', b' ', b'-'][(r >> 3) as usize % 8],
                    _ => b'0' + r % 10,
                };
            }
            let n = b.iter().take_while(|c| c.is_ascii_digit()).count();
            let v = b[..n]
                .iter()
                .fold(0u64, |a, &c| a * 10 + u64::from(c - b'0'));
            assert_eq!(digits8(&b), Some((n, v)), "{b:?}");
        }
        assert_eq!(digits8(b"1234567"), None);
        assert_eq!(digits8(b"99999999"), Some((8, 99_999_999)));
    }

    #[test]
    fn refuses_what_it_cannot_read_exactly() {
        for s in [
            "",
            "-",
            ".",
            "5.",
            ".5",
            "+1",
            "1e5",
            "1E-4",
            "NaN",
            "Infinity",
            "1.2.3",
            "1,2",
            "--1",
            "12345678901234567890",
            "9007199254740993",
            " 1",
            "1 ",
        ] {
            assert_eq!(simple_f64(s.as_bytes()), None, "{s:?}");
        }
        assert_eq!(simple_f32(b"1e-45"), None);
        assert_eq!(simple_f64_prefix(b"-12.5,3"), Some((-12.5, 5)));
        assert_eq!(simple_f64_prefix(b"7\n"), Some((7.0, 1)));
        assert_eq!(simple_f64_prefix(b"7e3"), Some((7.0, 1)));
        assert_eq!(simple_f32_prefix(b"0.25\r\n"), Some((0.25, 4)));
        assert_eq!(simple_f64_prefix(b"7.\n"), None);
        // Subnormal f32 and beyond f32::MAX.
        assert_eq!(simple_f32(b"0.0000000000000000001"), None);
        assert_eq!(
            simple_f32(b"340282350000000000000000000000000000000.5"),
            None
        );
    }

    #[test]
    fn reads_like_str_parse() {
        for s in [
            "0",
            "-0",
            "0.0",
            "-0.0",
            "804.923975",
            "-755.488517",
            "424.09",
            "0.1",
            "0.3",
            "16777217",
            "16777216.5",
            "1.00000005960464477539",
            "0.000123",
            "9999999.0",
            "1.4",
            "3.14159265358979",
            "123456789012345678",
            "-0.000000000000000000001",
        ] {
            same_f32(s);
            same_f64(s);
        }
        assert_eq!(
            simple_f32(b"-0").map(f32::to_bits),
            Some((-0.0f32).to_bits())
        );
    }

    /// Decimals built to land on or next to f32 midpoints, where rounding twice would show.
    #[test]
    fn midpoints_round_once() {
        for bits in (0x3f80_0000u32..0x3f80_0400).chain(0x4b7f_ff00..0x4b80_0100) {
            let lo = f32::from_bits(bits) as f64;
            let hi = f32::from_bits(bits + 1) as f64;
            let mid = (lo + hi) / 2.0;
            for x in [mid, lo, hi] {
                for p in [6usize, 8, 9, 10, 12, 15, 17] {
                    same_f32(&format!("{x:.p$}"));
                }
            }
        }
    }

    /// Decimals a few units of their last digit from f32 midpoints, over the whole plain range:
    /// where rounding the f64 quotient again to f32 is closest to going wrong.
    #[test]
    fn near_midpoints_at_random_read_like_str_parse() {
        let mut s: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..200_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            // f32s of magnitude 1e-6 .. 1e7 (exponents 0x6a..0x97).
            let bits = (0x6a + (s % 46) as u32) << 23 | ((s >> 8) as u32 & 0x7f_ffff);
            let (lo, hi) = (f32::from_bits(bits) as f64, f32::from_bits(bits + 1) as f64);
            let mid = (lo + hi) / 2.0;
            let p = 8 + ((s >> 40) % 11) as usize;
            let t = format!("{mid:.p$}");
            same_f32(&t);
            // The same with the last digit moved by 1..3 either way.
            let (head, last) = t.split_at(t.len() - 1);
            let d = last.as_bytes()[0] - b'0';
            for delta in 1..=3u8 {
                if d >= delta {
                    same_f32(&format!("{head}{}", d - delta));
                }
                if d + delta <= 9 {
                    same_f32(&format!("{head}{}", d + delta));
                }
            }
        }
    }

    /// Long mantissas and many fraction digits, where 10^-k is furthest from exact.
    #[test]
    fn long_decimals_read_like_str_parse() {
        let mut s: u64 = 0xdead_beef_cafe_f00d;
        for _ in 0..1_000_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let m = (s >> 11) % (1 << 53);
            let digits = m.to_string();
            let k = (s as usize % 20).min(digits.len().saturating_sub(1));
            let (a, b) = digits.split_at(digits.len() - k);
            let t = if k == 0 {
                a.to_string()
            } else {
                format!("{a}.{b}")
            };
            same_f32(&t);
        }
    }

    #[test]
    fn random_decimals_read_like_str_parse() {
        let mut s: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..300_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let int = s % 10_000_000;
            let frac = (s >> 24) % 1_000_000_000;
            let width = 1 + ((s >> 56) % 10) as usize;
            let t = format!("{}{int}.{frac:0width$}", if s & 1 == 1 { "-" } else { "" });
            same_f32(&t);
            same_f64(&t);
        }
    }
}
