//! Number and string text, written straight into a caller's buffer (no allocation).
//!
//! Two float styles exist:
//! - Python `repr` style for the generic layouts (SPEC §3): shortest digits in the value's own
//!   dtype; plain when the decimal exponent is in `-4..16` (`0.0001`, `1e+16`), otherwise
//!   scientific with a signed two-digit-minimum exponent; `nan`, `inf`, `-inf`, `-0.0`.
//! - Java `Float.toString`/`Double.toString` (JDK 19+) for the Angel layouts
//!   (formats/angel.md §6): plain when `1e-3 ≤ |x| < 1e7`, else `d.dddE±n` without `+`;
//!   `NaN`, `Infinity`, `-Infinity`. When the shortest decimal has one digit, Java uses the
//!   closest decimal of at most two digits instead (`1.4E-45`, not `1.0E-45`); that only
//!   differs for subnormals, where the rounding interval is wide.

mod int;
mod shortest;

pub(crate) use int::Ascending;
use int::{put_i64, put_u64};

pub(crate) use shortest::{digits_bf16, digits_f16, digits_f32, digits_f64, Digits};

/// Decimal text of an unsigned integer.
#[inline]
pub(crate) fn write_u64(v: u64, out: &mut Vec<u8>) {
    in_tail::<20>(out, |t| put_u64(v, t));
}

/// Decimal text of a signed integer (`-` for negatives).
#[inline]
pub(crate) fn write_i64(v: i64, out: &mut Vec<u8>) {
    in_tail::<21>(out, |t| put_i64(v, t));
}

/// ` {col}:`, the start of a libsvm entry, in one piece (`ids` keeps what ascending column
/// ids share).
#[inline]
pub(crate) fn write_libsvm_col(col: i64, ids: &mut Ascending, out: &mut Vec<u8>) {
    in_tail::<23>(out, |t| {
        t[0] = b' ';
        let n = 1 + match u64::try_from(col) {
            Ok(c) => ids.put(c, &mut t[1..]),
            Err(_) => put_i64(col, &mut t[1..]),
        };
        t[n] = b':';
        n + 1
    });
}

/// ` {col}:{x}`, a whole libsvm entry of a float32 value in one piece: one reservation and
/// one length update for both numbers.
#[inline]
pub(crate) fn write_libsvm_f32(col: i64, x: f32, ids: &mut Ascending, out: &mut Vec<u8>) {
    let a = x.abs() as f64;
    let (Ok(c), true) = (u64::try_from(col), (PY_FAST_MIN..PY_FAST_MAX).contains(&a)) else {
        write_libsvm_col(col, ids, out);
        write_f32_py(x, out);
        return;
    };
    let mut text = zmij::Buffer::new();
    let v = text.format_finite(x).as_bytes();
    // ` ` + 20 digits at most + `:` + the float's 4..=16 bytes (shortest f32 digits, 9 at
    // most, a sign and a point, and up to 3 zeros before them below 1e-2).
    let n = v.len();
    debug_assert!((3..=16).contains(&n));
    if !(4..=16).contains(&n) {
        write_libsvm_col(col, ids, out);
        out.extend_from_slice(v);
        return;
    }
    in_tail::<40>(out, |t| {
        t[0] = b' ';
        let at = 1 + ids.put(c, &mut t[1..]);
        t[at] = b':';
        let t = &mut t[at + 1..];
        // Four overlapping copies of four bytes cover any 4..=16, without a branch: copies
        // of different sizes on different branches are merged by LLVM into one `memcpy` call
        // of a length known at run time (7 % of a one-core `cat` of an LR's libsvm).
        for o in [0, (n - 4) / 3, 2 * (n - 4) / 3, n - 4] {
            t[o..o + 4].copy_from_slice(&v[o..o + 4]);
        }
        at + 1 + n
    });
}

/// Appends `b`, a float's text (at most 24 bytes): two or three overlapping fixed-size copies,
/// where `extend_from_slice` of a length known only at run time is a call to `memcpy` per
/// number.
#[inline(always)]
fn push_short(out: &mut Vec<u8>, b: &[u8]) {
    let n = b.len();
    if !(4..=24).contains(&n) {
        out.extend_from_slice(b);
        return;
    }
    in_tail::<24>(out, |t| {
        if n >= 8 {
            t[..8].copy_from_slice(&b[..8]);
            t[n / 2 - 4..n / 2 + 4].copy_from_slice(&b[n / 2 - 4..n / 2 + 4]);
            t[n - 8..n].copy_from_slice(&b[n - 8..]);
        } else {
            t[..4].copy_from_slice(&b[..4]);
            t[n - 4..n].copy_from_slice(&b[n - 4..]);
        }
        n
    });
}

/// Lets `write` put at most `N` bytes straight at the end of `out` and keeps the count it
/// returns. Writing in place, rather than into a local buffer appended after, matters: reading
/// back a buffer just written in several pieces stalls the CPU (no store forwarding), and that
/// was most of the time of a number's text.
#[inline(always)]
fn in_tail<const N: usize>(out: &mut Vec<u8>, write: impl FnOnce(&mut [u8; N]) -> usize) {
    let len = out.len();
    out.extend_from_slice(&[0u8; N]);
    let tail: &mut [u8; N] = (&mut out[len..]).try_into().expect("N bytes were added");
    let n = write(tail);
    debug_assert!(n <= N);
    out.truncate(len + n);
}

/// Lays out `d` Python-style (see the module comment); the sign is written by the caller.
fn layout_py(d: &Digits, out: &mut Vec<u8>) {
    let digits = d.as_bytes();
    let e = d.exp;
    if (-4..16).contains(&e) {
        layout_plain(digits, e, out);
    } else {
        out.push(digits[0]);
        if digits.len() > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        out.push(if e < 0 { b'-' } else { b'+' });
        let a = e.unsigned_abs();
        if a < 10 {
            out.push(b'0');
        }
        write_u64(a as u64, out);
    }
}

/// Lays out `d` Java-style (see the module comment); the sign is written by the caller.
fn layout_java(d: &Digits, out: &mut Vec<u8>) {
    let digits = d.as_bytes();
    let e = d.exp;
    if (-3..7).contains(&e) {
        layout_plain(digits, e, out);
    } else {
        out.push(digits[0]);
        out.push(b'.');
        if digits.len() > 1 {
            out.extend_from_slice(&digits[1..]);
        } else {
            out.push(b'0');
        }
        out.push(b'E');
        write_i64(e as i64, out);
    }
}

/// Plain notation with at least one fraction digit.
fn layout_plain(digits: &[u8], e: i32, out: &mut Vec<u8>) {
    if e >= 0 {
        let int_len = e as usize + 1;
        if digits.len() <= int_len {
            out.extend_from_slice(digits);
            out.resize(out.len() + int_len - digits.len(), b'0');
            out.extend_from_slice(b".0");
        } else {
            out.extend_from_slice(&digits[..int_len]);
            out.push(b'.');
            out.extend_from_slice(&digits[int_len..]);
        }
    } else {
        out.extend_from_slice(b"0.");
        out.resize(out.len() + (-e - 1) as usize, b'0');
        out.extend_from_slice(digits);
    }
}

/// Writes the special values; returns false for a finite non-zero `x` (sign already written).
#[inline]
fn special(x: f64, java: bool, out: &mut Vec<u8>) -> bool {
    if x.is_nan() {
        out.extend_from_slice(if java { b"NaN" } else { b"nan" });
        return true;
    }
    if x.is_sign_negative() {
        out.push(b'-');
    }
    if x.is_infinite() {
        out.extend_from_slice(if java { b"Infinity" } else { b"inf" });
        return true;
    }
    if x == 0.0 {
        out.extend_from_slice(b"0.0");
        return true;
    }
    false
}

/// Magnitudes for which ryu's own text is already Python's (zmij, which writes it at twice the
/// speed, prints the same text here: checked over every f32 and 2·10^8 f64s of the range): both write plain notation (ryu
/// for decimal exponents -6 < kk <= 13 of `10^(kk-1) <= v < 10^kk`, Python for -4 <= kk-1 < 16)
/// with the same shortest digits, `0.` before leading zeros and `.0` after integers. Kept well
/// inside both ranges so that rounding at the edges cannot matter.
const PY_FAST_MIN: f64 = 1e-3;
const PY_FAST_MAX: f64 = 1e7;

/// Python-style text of an f64.
#[inline]
pub(crate) fn write_f64_py(x: f64, out: &mut Vec<u8>) {
    let a = x.abs();
    if (PY_FAST_MIN..PY_FAST_MAX).contains(&a) {
        push_short(out, zmij::Buffer::new().format_finite(x).as_bytes());
        return;
    }
    if !special(x, false, out) {
        layout_py(&digits_f64(x), out);
    }
}

/// Python-style text of an f32 (shortest f32 digits).
#[inline]
pub fn write_f32_py(x: f32, out: &mut Vec<u8>) {
    let a = x.abs() as f64;
    if (PY_FAST_MIN..PY_FAST_MAX).contains(&a) {
        push_short(out, zmij::Buffer::new().format_finite(x).as_bytes());
        return;
    }
    if !special(x as f64, false, out) {
        layout_py(&digits_f32(x), out);
    }
}

/// The general path of `write_f32_py` / `write_f64_py` (tests compare the fast path to it).
#[cfg(test)]
pub(crate) fn write_py_slow(x: f64, single: bool, out: &mut Vec<u8>) {
    if !special(x, false, out) {
        if single {
            layout_py(&digits_f32(x as f32), out);
        } else {
            layout_py(&digits_f64(x), out);
        }
    }
}

/// Python-style text of a float16 given by its bits (shortest float16 digits).
#[inline]
pub(crate) fn write_f16_py(bits: u16, out: &mut Vec<u8>) {
    let x = half::f16::from_bits(bits).to_f64();
    if !special(x, false, out) {
        layout_py(&digits_f16(bits), out);
    }
}

/// Python-style text of a bfloat16 given by its bits (shortest bfloat16 digits).
#[inline]
pub(crate) fn write_bf16_py(bits: u16, out: &mut Vec<u8>) {
    let x = half::bf16::from_bits(bits).to_f64();
    if !special(x, false, out) {
        layout_py(&digits_bf16(bits), out);
    }
}

/// `re+imj` with both parts in Python style (`1.0+2.0j`, `-0.5-1e-05j`, `1.0+nanj`).
pub(crate) fn write_complex_py(re: f64, im: f64, single: bool, out: &mut Vec<u8>) {
    if single {
        write_f32_py(re as f32, out);
    } else {
        write_f64_py(re, out);
    }
    // The imaginary part brings its own '-'; NaN has none, so it gets '+'.
    if im.is_nan() || !im.is_sign_negative() {
        out.push(b'+');
    }
    if single {
        write_f32_py(im as f32, out);
    } else {
        write_f64_py(im, out);
    }
    out.push(b'j');
}

/// Java `Double.toString` text.
#[inline]
pub(crate) fn write_f64_java(x: f64, out: &mut Vec<u8>) {
    if special(x, true, out) {
        return;
    }
    let mut d = digits_f64(x);
    if d.len == 1 && x.abs() < f64::MIN_POSITIVE {
        let two = shortest::digits_two_f64(x);
        if parse_digits::<f64>(&two) == Some(x.abs()) {
            d = two;
        }
    }
    layout_java(&d, out);
}

/// Java `Float.toString` text.
#[inline]
pub(crate) fn write_f32_java(x: f32, out: &mut Vec<u8>) {
    if special(x as f64, true, out) {
        return;
    }
    let mut d = digits_f32(x);
    if d.len == 1 && x.abs() < f32::MIN_POSITIVE {
        let two = shortest::digits_two_f64(x as f64);
        if parse_digits::<f32>(&two) == Some(x.abs()) {
            d = two;
        }
    }
    layout_java(&d, out);
}

/// Reads `d` back (rare paths only: allocates).
fn parse_digits<T: std::str::FromStr>(d: &Digits) -> Option<T> {
    let mut s = Vec::with_capacity(32);
    layout_py(d, &mut s);
    std::str::from_utf8(&s).ok()?.parse::<T>().ok()
}

/// Splits `s` into runs of valid UTF-8 each followed by the invalid bytes after it (possibly
/// none), calling `f(valid, invalid)` for each run in order.
pub(crate) fn for_each_utf8_run(mut s: &[u8], mut f: impl FnMut(&str, &[u8])) {
    while !s.is_empty() {
        let (valid, bad) = match std::str::from_utf8(s) {
            Ok(v) => (v.len(), 0),
            Err(e) => (
                e.valid_up_to(),
                e.error_len().unwrap_or(s.len() - e.valid_up_to()),
            ),
        };
        // `valid` bytes were just checked to be UTF-8.
        f(
            std::str::from_utf8(&s[..valid]).unwrap_or(""),
            &s[valid..valid + bad],
        );
        s = &s[valid + bad..];
    }
}

/// A string element for text layouts: `\\`, `\n`, `\r`, `\t` escaped; other bytes below 0x20,
/// 0x7f and every byte of invalid UTF-8 as `\xHH`; valid multi-byte UTF-8 passes through.
pub(crate) fn write_escaped(s: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let hex = |b: u8, out: &mut Vec<u8>| {
        out.extend_from_slice(&[b'\\', b'x', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
    };
    for_each_utf8_run(s, |valid, bad| {
        for &b in valid.as_bytes() {
            match b {
                b'\\' => out.extend_from_slice(b"\\\\"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b'\t' => out.extend_from_slice(b"\\t"),
                0..=0x1f | 0x7f => hex(b, out),
                _ => out.push(b),
            }
        }
        for &b in bad {
            hex(b, out);
        }
    });
}

#[cfg(test)]
mod tests;
