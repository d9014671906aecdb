//! Shortest round-trip decimal digits of a float in its own precision.
//!
//! f32/f64 come from `ryu` (shortest digits, closest to the exact value among the shortest);
//! float16 and bfloat16 from tables built once by searching, for each positive bit pattern,
//! the fewest significant digits whose decimal rounds back to the same bits.

use std::sync::OnceLock;

/// A positive finite non-zero value as `d1.d2d3… × 10^exp` (`digits` are ASCII, no leading or
/// trailing zeros, `1 ≤ len ≤ 17`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Digits {
    pub(crate) buf: [u8; 24],
    pub(crate) len: usize,
    pub(crate) exp: i32,
}

impl Digits {
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Parses ryu's (or Rust's `{:e}`) output of a positive finite non-zero number:
    /// `[digits][.digits][e[-]digits]`.
    fn parse(s: &[u8]) -> Digits {
        let mut d = Digits {
            buf: [0; 24],
            len: 0,
            exp: 0,
        };
        // `point` = number of mantissa digits (kept or dropped as leading zeros) before '.'.
        let mut point: i32 = 0;
        let mut seen_point = false;
        let mut exp10: i32 = 0;
        let mut i = 0;
        while i < s.len() {
            let c = s[i];
            match c {
                b'0'..=b'9' => {
                    if d.len == 0 && c == b'0' {
                        // Leading zero: shifts the point left when after it.
                        if seen_point {
                            point -= 1;
                        }
                    } else {
                        if d.len < d.buf.len() {
                            d.buf[d.len] = c;
                            d.len += 1;
                        }
                        if !seen_point {
                            point += 1;
                        }
                    }
                }
                b'.' => seen_point = true,
                b'e' | b'E' => {
                    let mut neg = false;
                    let mut j = i + 1;
                    if j < s.len() && (s[j] == b'-' || s[j] == b'+') {
                        neg = s[j] == b'-';
                        j += 1;
                    }
                    while j < s.len() {
                        exp10 = exp10 * 10 + (s[j] - b'0') as i32;
                        j += 1;
                    }
                    if neg {
                        exp10 = -exp10;
                    }
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        while d.len > 1 && d.buf[d.len - 1] == b'0' {
            d.len -= 1;
        }
        d.exp = point - 1 + exp10;
        d
    }

    fn from_int(mut c: u64, exp_of_last_digit: i32) -> Digits {
        let mut tmp = [0u8; 24];
        let mut n = 0;
        while c > 0 {
            tmp[n] = b'0' + (c % 10) as u8;
            c /= 10;
            n += 1;
        }
        let mut d = Digits {
            buf: [0; 24],
            len: n,
            exp: exp_of_last_digit + n as i32 - 1,
        };
        for k in 0..n {
            d.buf[k] = tmp[n - 1 - k];
        }
        while d.len > 1 && d.buf[d.len - 1] == b'0' {
            d.len -= 1;
        }
        d
    }
}

/// Shortest digits of |x| for a finite non-zero f64.
#[inline]
pub(crate) fn digits_f64(x: f64) -> Digits {
    let mut b = ryu::Buffer::new();
    Digits::parse(b.format_finite(x.abs()).as_bytes())
}

/// Shortest digits of |x| for a finite non-zero f32.
#[inline]
pub(crate) fn digits_f32(x: f32) -> Digits {
    let mut b = ryu::Buffer::new();
    Digits::parse(b.format_finite(x.abs()).as_bytes())
}

/// The decimal `x` rounded to 2 significant digits (exact), for Java's rule that a
/// one-digit shortest result is replaced by the closest decimal of at most two digits.
pub(crate) fn digits_two_f64(x: f64) -> Digits {
    use std::io::Write;
    let mut buf = [0u8; 40];
    let mut cur = std::io::Cursor::new(&mut buf[..]);
    let _ = write!(cur, "{:.1e}", x.abs());
    let n = cur.position() as usize;
    Digits::parse(&buf[..n])
}

/// Compact table entry: digits as an integer, their count and the exponent.
#[derive(Clone, Copy, Default)]
struct Packed {
    digits: u32,
    len: u8,
    exp: i8,
}

fn unpack(p: Packed) -> Digits {
    let mut d = Digits {
        buf: [0; 24],
        len: p.len as usize,
        exp: p.exp as i32,
    };
    let mut c = p.digits;
    for k in (0..d.len).rev() {
        d.buf[k] = b'0' + (c % 10) as u8;
        c /= 10;
    }
    d
}

/// Shortest digits of the positive value with bit pattern `bits` (sign bit clear, finite,
/// non-zero) of a 16-bit format whose values are given by `value`, `max_bits` being the bits
/// of its largest finite value. `also` is an extra condition a candidate decimal must meet.
fn search_16(
    bits: u16,
    max_bits: u16,
    value: fn(u16) -> f64,
    also: fn(u16, f64) -> bool,
) -> Packed {
    let x = value(bits);
    let lo = value(bits - 1);
    let hi = if bits == max_bits {
        x + (x - lo)
    } else {
        value(bits + 1)
    };
    // Exact in f64: the formats have at most 11 significant bits.
    let mid_lo = (lo + x) / 2.0;
    let mid_hi = (x + hi) / 2.0;
    let even = bits & 1 == 0;
    let rounds_back = |y: f64| {
        ((mid_lo < y && y < mid_hi) || ((y == mid_lo || y == mid_hi) && even)) && also(bits, y)
    };
    for n in 1..=12usize {
        let s = format!("{:.*e}", n - 1, x);
        let near = Digits::parse(s.as_bytes());
        // The nearest n-digit decimal as integer `c` × 10^p.
        let mut c: u64 = 0;
        for &b in near.as_bytes() {
            c = c * 10 + (b - b'0') as u64;
        }
        let p = near.exp - (n as i32 - 1);
        for _ in near.len..n {
            c *= 10;
        }
        let mut best: Option<(u64, f64)> = None;
        for cand in [c.saturating_sub(1), c, c + 1] {
            if cand == 0 {
                continue;
            }
            let y: f64 = format!("{cand}e{p}").parse().unwrap_or(f64::NAN);
            if !rounds_back(y) {
                continue;
            }
            let dist = (y - x).abs();
            best = match best {
                None => Some((cand, dist)),
                Some((bc, bd)) => {
                    let tie = (dist - bd).abs() <= 1e-12 * x;
                    if (tie && cand % 2 == 0 && bc % 2 == 1) || (!tie && dist < bd) {
                        Some((cand, dist))
                    } else {
                        Some((bc, bd))
                    }
                }
            };
        }
        if let Some((cand, _)) = best {
            let d = Digits::from_int(cand, p);
            let mut digits = 0u32;
            for &b in d.as_bytes() {
                digits = digits * 10 + (b - b'0') as u32;
            }
            return Packed {
                digits,
                len: d.len as u8,
                exp: d.exp as i8,
            };
        }
    }
    unreachable!("12 significant digits always identify a 16-bit float")
}

fn build_table(max_bits: u16, value: fn(u16) -> f64, also: fn(u16, f64) -> bool) -> Box<[Packed]> {
    let mut t = vec![Packed::default(); max_bits as usize + 1].into_boxed_slice();
    for bits in 1..=max_bits {
        t[bits as usize] = search_16(bits, max_bits, value, also);
    }
    t
}

fn any_decimal(_: u16, _: f64) -> bool {
    true
}

/// bfloat16 text must also read back through float32 *truncated* to its top 16 bits, which is
/// how many bf16 readers (and the shared conformance check) convert a decimal: so the digits
/// are the shortest in `[x, x + ulp/2]` rather than `[x - ulp/2, x + ulp/2]` (`0.1001`, not
/// `0.1`, for the bfloat16 nearest 0.1). Both readings then give the same bfloat16.
fn truncates_back(bits: u16, y: f64) -> bool {
    ((y as f32).to_bits() >> 16) as u16 == bits
}

fn f16_value(bits: u16) -> f64 {
    half::f16::from_bits(bits).to_f64()
}

fn bf16_value(bits: u16) -> f64 {
    half::bf16::from_bits(bits).to_f64()
}

const F16_MAX_BITS: u16 = 0x7bff;
const BF16_MAX_BITS: u16 = 0x7f7f;

static F16_TABLE: OnceLock<Box<[Packed]>> = OnceLock::new();
static BF16_TABLE: OnceLock<Box<[Packed]>> = OnceLock::new();

/// Shortest float16 digits of |x| for finite non-zero `bits`.
pub(crate) fn digits_f16(bits: u16) -> Digits {
    let t = F16_TABLE.get_or_init(|| build_table(F16_MAX_BITS, f16_value, any_decimal));
    unpack(t[(bits & 0x7fff) as usize])
}

/// Shortest bfloat16 digits of |x| for finite non-zero `bits`.
pub(crate) fn digits_bf16(bits: u16) -> Digits {
    let t = BF16_TABLE.get_or_init(|| build_table(BF16_MAX_BITS, bf16_value, truncates_back));
    unpack(t[(bits & 0x7fff) as usize])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(d: Digits) -> (String, i32) {
        (String::from_utf8(d.as_bytes().to_vec()).unwrap(), d.exp)
    }

    #[test]
    fn parse_forms() {
        assert_eq!(s(Digits::parse(b"0.001234")), ("1234".into(), -3));
        assert_eq!(s(Digits::parse(b"12340000000.0")), ("1234".into(), 10));
        assert_eq!(s(Digits::parse(b"1e-7")), ("1".into(), -7));
        assert_eq!(s(Digits::parse(b"1.234e30")), ("1234".into(), 30));
        assert_eq!(s(Digits::parse(b"12.34")), ("1234".into(), 1));
        assert_eq!(s(Digits::parse(b"1.0")), ("1".into(), 0));
    }

    #[test]
    fn halves() {
        // 0.1 in f16 is 0.0999755859375; shortest f16 digits are "0.1".
        assert_eq!(
            s(digits_f16(half::f16::from_f32(0.1).to_bits())),
            ("1".into(), -1)
        );
        assert_eq!(s(digits_f16(0x7bff)), ("655".into(), 4));
        assert_eq!(s(digits_f16(0x0001)), ("6".into(), -8));
        assert_eq!(
            s(digits_bf16(half::bf16::from_f32(0.1).to_bits())),
            ("1001".into(), -1)
        );
        assert_eq!(s(digits_bf16(0x3f80)), ("1".into(), 0));
    }
}
