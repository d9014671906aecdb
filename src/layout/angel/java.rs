//! Java `Float.toString` / `Double.toString` text (formats/angel.md §6), JDK 19+ semantics:
//! the shortest decimal that reads back to the same value of the number's own type (the
//! closest 2-digit one when a single digit would do, e.g. `1.4E-45`), plain notation with at
//! least one fraction digit for `1e-3 ≤ |x| < 1e7`, otherwise `d.dddE<exp>`.
//!
//! Shortest digits come from `ryu`; this module only lays them out Java's way.

/// Significant digits (at most 17 for f64) held without allocating.
struct Digits {
    buf: [u8; 32],
    len: usize,
}

impl std::ops::Deref for Digits {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// Appends the decimal form of `v` (no allocation).
pub fn write_i64(v: i64, out: &mut Vec<u8>) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut n = v.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if v < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[i..]);
}

/// The two significant digits closest to `x` (> 0) and the exponent of the first, for the
/// case where one digit would do; `{:.1e}` rounds the exact binary value correctly.
fn two_digits(x: f64) -> (Digits, i32) {
    use std::io::Write;
    let mut tmp = [0u8; 32];
    let mut cur = std::io::Cursor::new(&mut tmp[..]);
    let _ = write!(cur, "{x:.1e}");
    let n = cur.position() as usize;
    digits_exp(std::str::from_utf8(&tmp[..n]).unwrap_or("0"))
}

/// Splits ryu's output (`1.5E-5`, `123.0`, `1E7`, `-0.001`) into significant digits (no
/// leading/trailing zeros) and the decimal exponent of the first digit.
fn digits_exp(s: &str) -> (Digits, i32) {
    let s = s.trim_start_matches('-');
    let (mant, exp) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], s[i + 1..].parse::<i32>().unwrap_or(0)),
        None => (s, 0),
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    let mut d = Digits {
        buf: [0; 32],
        len: 0,
    };
    let mut lead = 0;
    for b in int.bytes().chain(frac.bytes()) {
        if d.len == 0 && b == b'0' {
            lead += 1;
        } else if d.len < d.buf.len() {
            d.buf[d.len] = b;
            d.len += 1;
        }
    }
    while d.len > 1 && d.buf[d.len - 1] == b'0' {
        d.len -= 1;
    }
    if d.len == 0 {
        d.buf[0] = b'0';
        d.len = 1;
        return (d, 0);
    }
    let digits = d;
    // value = 0.<all> × 10^(int.len()) × 10^exp; first significant digit at int.len()-1-lead.
    (digits, int.len() as i32 - 1 - lead as i32 + exp)
}

fn layout(neg: bool, digits: &[u8], exp: i32, out: &mut Vec<u8>) {
    if neg {
        out.push(b'-');
    }
    if (-3..7).contains(&exp) {
        if exp >= 0 {
            let e = exp as usize + 1;
            for i in 0..e {
                out.push(*digits.get(i).unwrap_or(&b'0'));
            }
            out.push(b'.');
            if digits.len() > e {
                out.extend_from_slice(&digits[e..]);
            } else {
                out.push(b'0');
            }
        } else {
            out.extend_from_slice(b"0.");
            out.extend(std::iter::repeat_n(b'0', (-exp - 1) as usize));
            out.extend_from_slice(digits);
        }
    } else {
        out.push(digits[0]);
        out.push(b'.');
        if digits.len() > 1 {
            out.extend_from_slice(&digits[1..]);
        } else {
            out.push(b'0');
        }
        out.push(b'E');
        write_i64(exp as i64, out);
    }
}

fn special(is_nan: bool, is_inf: bool, neg: bool, zero: bool, out: &mut Vec<u8>) -> bool {
    let s: &[u8] = if is_nan {
        b"NaN"
    } else if is_inf {
        if neg {
            b"-Infinity"
        } else {
            b"Infinity"
        }
    } else if zero {
        if neg {
            b"-0.0"
        } else {
            b"0.0"
        }
    } else {
        return false;
    };
    out.extend_from_slice(s);
    true
}

pub fn write_f64(x: f64, out: &mut Vec<u8>) {
    let neg = x.is_sign_negative();
    if special(x.is_nan(), x.is_infinite(), neg, x == 0.0, out) {
        return;
    }
    let mut b = ryu::Buffer::new();
    let (mut digits, mut exp) = digits_exp(b.format_finite(x));
    if digits.len() == 1 {
        (digits, exp) = two_digits(x.abs());
    }
    layout(neg, &digits, exp, out);
}

pub fn write_f32(x: f32, out: &mut Vec<u8>) {
    let neg = x.is_sign_negative();
    if special(x.is_nan(), x.is_infinite(), neg, x == 0.0, out) {
        return;
    }
    let mut b = ryu::Buffer::new();
    let (mut digits, mut exp) = digits_exp(b.format_finite(x));
    if digits.len() == 1 {
        // The exact value of an f32 is an f64; round it to two significant digits.
        (digits, exp) = two_digits((x as f64).abs());
    }
    layout(neg, &digits, exp, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(x: f32) -> String {
        let mut v = Vec::new();
        write_f32(x, &mut v);
        String::from_utf8(v).unwrap()
    }
    fn d(x: f64) -> String {
        let mut v = Vec::new();
        write_f64(x, &mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn java_strings() {
        for s in [
            "0.0",
            "-0.0",
            "NaN",
            "Infinity",
            "-Infinity",
            "9.999E-4",
            "1.08223285E-5",
            "1.0E7",
            "9999999.0",
            "3.4028235E38",
            "1.4E-45",
            "-1.3820986",
            "-0.40434486",
            "100.0",
            "0.001",
            "1.0E-4",
            "1.0",
            "5.0",
            "-3.0",
            "123456.7",
            "1.5E10",
        ] {
            let x: f32 = s.parse().unwrap();
            assert_eq!(f(x), s);
        }
        assert_eq!(d(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(d(1e-5), "1.0E-5");
        assert_eq!(d(2e23), "2.0E23");
        assert_eq!(d(4.9e-324), "4.9E-324");
        assert_eq!(d(1e7), "1.0E7");
        assert_eq!(d(-1234.5), "-1234.5");
        assert_eq!(d(0.001), "0.001");
        assert_eq!(d(9.999e-4), "9.999E-4");
        for v in [0i64, 7, -7, 1234567890, i64::MIN, i64::MAX] {
            let mut o = Vec::new();
            write_i64(v, &mut o);
            assert_eq!(o, v.to_string().as_bytes());
        }
    }
}
