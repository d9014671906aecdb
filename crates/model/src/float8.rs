//! The narrow float types numpy lacks (float8 in its four common forms and TF's e4m3b11fnuz,
//! float4_e2m1fn), widened to float32: every value is exactly representable there, so the
//! widened value is the value, and its shortest float32 text is exact.
//!
//! The forms differ at the top of the range:
//! - `e5m2` is IEEE-like: exponent all ones is infinity (mantissa 0) or NaN;
//! - `e4m3fn` ("finite") has no infinity: only S.1111.111 is NaN;
//! - the `fnuz` forms ("finite, no negative zero") have one NaN, 0x80, and no -0;
//! - `float4_e2m1fn` (low 4 bits of its byte) has neither.

/// How a form spends its top codes.
#[derive(Clone, Copy)]
enum Top {
    Ieee,
    FiniteAllOnesNan,
    NegativeZeroNan,
    AllFinite,
}

/// The float32 value of `bits` in the narrow float form of TF code `code` (the codes of
/// `DType::Float8`); NaN for a code that is not one.
pub fn widen(code: u8, bits: u8) -> f32 {
    let (e, m, bias, top) = match code {
        24 => (5, 2, 15, Top::Ieee),
        25 => (4, 3, 7, Top::FiniteAllOnesNan),
        26 => (4, 3, 8, Top::NegativeZeroNan),
        27 => (4, 3, 11, Top::NegativeZeroNan),
        28 => (5, 2, 16, Top::NegativeZeroNan),
        33 => (2, 1, 1, Top::AllFinite),
        _ => return f32::NAN,
    };
    let bits = if code == 33 { bits & 0x0f } else { bits };
    let sign = if (bits >> (e + m)) & 1 == 1 {
        -1.0
    } else {
        1.0
    };
    let exp = i32::from((bits >> m) & ((1 << e) - 1));
    let man = bits & ((1 << m) - 1);
    let (max_exp, max_man) = ((1 << e) - 1, (1 << m) - 1);
    match top {
        Top::Ieee if exp == max_exp => {
            return if man == 0 {
                sign * f32::INFINITY
            } else {
                f32::NAN
            }
        }
        Top::FiniteAllOnesNan if exp == max_exp && man == max_man => return f32::NAN,
        Top::NegativeZeroNan if bits == 0x80 => return f32::NAN,
        _ => {}
    }
    // Products of a small integer and a power of two: exact in float32.
    let mag = match exp {
        0 => f32::from(man) * 2f32.powi(1 - bias - m),
        _ => f32::from((1u8 << m) | man) * 2f32.powi(exp - bias - m),
    };
    sign * mag
}

#[cfg(test)]
mod tests {
    use super::widen;

    #[test]
    fn known_values_of_every_form() {
        // e4m3fn: torch.tensor([...]).to(torch.float8_e4m3fn).view(torch.uint8)
        assert_eq!(widen(25, 0x38), 1.0);
        assert_eq!(widen(25, 0xb8), -1.0);
        assert_eq!(widen(25, 0x7e), 448.0);
        assert_eq!(widen(25, 0x01), 2f32.powi(-9));
        assert!(widen(25, 0x7f).is_nan() && widen(25, 0xff).is_nan());
        assert_eq!(widen(25, 0x80), 0.0);
        assert!(widen(25, 0x80).is_sign_negative());
        // e5m2: 57344 is the largest finite, 0x7c infinity.
        assert_eq!(widen(24, 0x3c), 1.0);
        assert_eq!(widen(24, 0x7b), 57344.0);
        assert_eq!(widen(24, 0x7c), f32::INFINITY);
        assert_eq!(widen(24, 0xfc), f32::NEG_INFINITY);
        assert!(widen(24, 0x7d).is_nan());
        assert_eq!(widen(24, 0x01), 2f32.powi(-16));
        // fnuz: bias one more, 0x80 the only NaN, all ones finite.
        assert_eq!(widen(26, 0x40), 1.0);
        assert_eq!(widen(26, 0x7f), 240.0);
        assert!(widen(26, 0x80).is_nan());
        assert_eq!(widen(28, 0x40), 1.0);
        assert_eq!(widen(28, 0x7f), 57344.0);
        assert!(widen(28, 0x80).is_nan());
        // float4_e2m1fn: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives, low nibble only.
        let f4: Vec<f32> = (0..8).map(|b| widen(33, b)).collect();
        assert_eq!(f4, [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]);
        assert_eq!(widen(33, 0x0f), -6.0);
        assert_eq!(widen(33, 0xf7), 6.0);
    }
}
