//! Java `Float.toString` / `Double.toString` text (formats/angel.md §6), JDK 19+ semantics:
//! the shortest decimal that reads back to the same value of the number's own type (the
//! closest 2-digit one when a single digit would do, e.g. `1.4E-45`), plain notation with at
//! least one fraction digit for `1e-3 ≤ |x| < 1e7`, otherwise `d.dddE<exp>`.
//!
//! Shortest digits come from `ryu`; this module only lays them out Java's way.

/// Splits ryu's output (`1.5E-5`, `123.0`, `1E7`, `-0.001`) into significant digits (no
/// leading/trailing zeros) and the decimal exponent of the first digit.
fn digits_exp(s: &str) -> (Vec<u8>, i32) {
    let s = s.trim_start_matches('-');
    let (mant, exp) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], s[i + 1..].parse::<i32>().unwrap_or(0)),
        None => (s, 0),
    };
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    let all: Vec<u8> = int.bytes().chain(frac.bytes()).collect();
    let lead = all.iter().take_while(|&&b| b == b'0').count();
    let mut digits: Vec<u8> = all[lead..].to_vec();
    while digits.len() > 1 && digits.last() == Some(&b'0') {
        digits.pop();
    }
    if digits.is_empty() {
        return (vec![b'0'], 0);
    }
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
        out.extend_from_slice(exp.to_string().as_bytes());
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
        (digits, exp) = digits_exp(&format!("{:.1e}", x.abs()));
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
        (digits, exp) = digits_exp(&format!("{:.1e}", (x as f64).abs()));
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
    }
}
