//! Decimal digits of integers, eight at a time: made in one register by multiplications (no
//! chain of divisions, no table lookups), then stored in one piece. A `cat` of an LR's libsvm
//! writes a column id per ~20 bytes; the digit-pair loop was a tenth of its time.

/// `v < 10^8` as eight ASCII digits with leading zeros, the most significant in the lowest
/// byte (so a little-endian store writes them in reading order).
#[inline(always)]
fn eight_digits(v: u32) -> u64 {
    debug_assert!(v < 100_000_000);
    // Lanes: [v / 10^4, v % 10^4] in 32-bit halves; then each split by 100 into 16-bit
    // quarters; then each by 10 into bytes. A lane's product never reaches the next lane
    // (9999 × 10486 < 2^32, 99 × 103 < 2^16), and the multiply-shifts are exact divisions
    // over their lanes' ranges (below 10^4 for ×10486 >> 20, below 100 for ×103 >> 10).
    let x = u64::from(v / 10_000) | (u64::from(v % 10_000) << 32);
    let hundreds = ((x * 10486) >> 20) & 0x0000_007f_0000_007f;
    let x = hundreds | ((x - hundreds * 100) << 16);
    let tens = ((x * 103) >> 10) & 0x000f_000f_000f_000f;
    let x = tens | ((x - tens * 10) << 8);
    x + 0x3030_3030_3030_3030
}

/// Stores the last `n` (1..=8) of the eight digits of `v` at `buf[at..at + n]`; eight bytes
/// from `at` are written (the ones past `n` are overwritten by whatever follows, or unused).
#[inline(always)]
fn store(buf: &mut [u8], at: usize, v: u64, n: usize) {
    debug_assert!((1..=8).contains(&n));
    let w = eight_digits(v as u32) >> (8 * (8 - n));
    buf[at..at + 8].copy_from_slice(&w.to_le_bytes());
}

/// Writes the digits of `v` at the front of `buf` (room for 20); their count.
#[inline]
pub(super) fn put_u64(v: u64, buf: &mut [u8]) -> usize {
    debug_assert!(buf.len() >= 20);
    const E8: u64 = 100_000_000;
    let n = v.checked_ilog10().map_or(1, |l| l as usize + 1);
    if n <= 8 {
        store(buf, 0, v, n);
    } else if n <= 16 {
        store(buf, 0, v / E8, n - 8);
        store(buf, n - 8, v % E8, 8);
    } else {
        let low = v % (E8 * E8);
        store(buf, 0, v / (E8 * E8), n - 16);
        store(buf, n - 16, low / E8, 8);
        store(buf, n - 8, low % E8, 8);
    }
    n
}

/// Writes `v` (`-` and digits) at the front of `buf` (room for 21); its length.
#[inline]
pub(super) fn put_i64(v: i64, buf: &mut [u8]) -> usize {
    let neg = v < 0;
    buf[0] = b'-';
    neg as usize + put_u64(v.unsigned_abs(), &mut buf[neg as usize..])
}

/// Digits of ascending integers, such as a sparse row's column ids: those above the last
/// eight change rarely from one to the next, so their text is kept and only the low eight are
/// made anew (half the work of `put_u64` for ids of 9 to 16 digits).
#[derive(Default)]
pub(crate) struct Ascending {
    /// `v / 10^8` of the last id of 9 or more digits, and its text (`high_len` ≤ 12 bytes:
    /// `u64::MAX / 10^8` has 12 digits).
    high: u64,
    high_text: [u8; 20],
    high_len: usize,
}

impl Ascending {
    /// Writes the digits of `v` at the front of `buf` (room for 20); their count. Any order
    /// of values is correct; ascending ones are fast.
    #[inline]
    pub(crate) fn put(&mut self, v: u64, buf: &mut [u8]) -> usize {
        const E8: u64 = 100_000_000;
        let high = v / E8;
        if high == 0 {
            return put_u64(v, buf);
        }
        if high != self.high || self.high_len == 0 {
            self.high = high;
            self.high_len = put_u64(high, &mut self.high_text);
        }
        let n = self.high_len;
        debug_assert!(n <= 12);
        buf[..16].copy_from_slice(&self.high_text[..16]);
        store(buf, n, v % E8, 8);
        n + 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(v: u64) -> String {
        let mut buf = [0u8; 20];
        let n = put_u64(v, &mut buf);
        String::from_utf8(buf[..n].to_vec()).unwrap()
    }

    #[test]
    fn digits_equal_std_at_every_length_boundary_and_at_random() {
        let mut edges = vec![0, 1, 9, u64::MAX, u64::MAX - 1, i64::MAX as u64];
        for e in 1..20 {
            let p = 10u64.pow(e);
            edges.extend([p - 1, p, p + 1, p / 2 * 3]);
            edges.extend(p.checked_mul(10).map(|q| q - 1)); // all nines one digit longer
        }
        let mut r = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..200_000 {
            r ^= r << 13;
            r ^= r >> 7;
            r ^= r << 17;
            edges.push(r >> (r % 64));
        }
        // Ascending ids through one writer, in the order given and sorted.
        for order in [edges.clone(), {
            let mut e = edges.clone();
            e.sort_unstable();
            e
        }] {
            let mut ids = Ascending::default();
            for v in order {
                let mut buf = [0u8; 20];
                let n = ids.put(v, &mut buf);
                assert_eq!(&buf[..n], v.to_string().as_bytes());
            }
        }
        for v in edges {
            assert_eq!(text(v), v.to_string());
            let mut buf = [0u8; 21];
            let n = put_i64(v as i64, &mut buf);
            assert_eq!(&buf[..n], (v as i64).to_string().as_bytes());
        }
    }
}
