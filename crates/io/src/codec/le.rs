//! Little-endian numbers in bytes held in memory: at a fixed offset (`u32_at`), or one after
//! another through a cursor (`Le`). Every read is bounded by the bytes there: a short buffer
//! is `None`, never a panic, so the parsers of GGUF, pickles, TFRecords and the key index
//! decide what a truncated input means.
//!
//! ```
//! use modelfs_io::codec::le::{self, Le};
//! let b = [1u8, 0, 0, 0, 0xff, 0xff];
//! assert_eq!(le::u32_at(&b, 0), Some(1));
//! assert_eq!(le::u32_at(&b, 4), None, "two bytes are not a u32");
//! let mut c = Le::new(&b);
//! assert_eq!(c.u32(), Some(1));
//! assert_eq!(c.i16(), Some(-1));
//! assert_eq!(c.u8(), None);
//! ```

macro_rules! numbers {
    ($($t:ident $at:ident),*) => {
        $(
            #[doc = concat!("The `", stringify!($t), "` at `at`, `None` past the end.")]
            pub fn $at(b: &[u8], at: usize) -> Option<$t> {
                let end = at.checked_add(std::mem::size_of::<$t>())?;
                Some($t::from_le_bytes(b.get(at..end)?.try_into().ok()?))
            }
        )*
        impl Le<'_> {
            $(
                #[doc = concat!("The next `", stringify!($t), "`, `None` past the end.")]
                pub fn $t(&mut self) -> Option<$t> {
                    Some($t::from_le_bytes(self.array()?))
                }
            )*
        }
    };
}

numbers!(
    u8 u8_at, u16 u16_at, u32 u32_at, u64 u64_at, i8 i8_at, i16 i16_at, i32 i32_at,
    i64 i64_at, f32 f32_at, f64 f64_at
);

/// A cursor over `bytes`: each read takes what it reads, or nothing when too few are left.
#[derive(Clone, Debug)]
pub struct Le<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Le<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Le { bytes, pos: 0 }
    }

    /// Where the next read starts.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        &self.bytes[self.pos..]
    }

    /// The next `n` bytes, `None` (and nothing taken) when fewer are left.
    pub fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.bytes.get(self.pos..end)?;
        self.pos = end;
        debug_assert!(self.pos <= self.bytes.len());
        Some(s)
    }

    /// The next `N` bytes as an array.
    pub fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    /// Steps over `n` bytes, `None` when fewer are left.
    pub fn skip(&mut self, n: usize) -> Option<()> {
        self.take(n).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_read_takes_nothing() {
        let b = [7u8, 1, 2];
        let mut c = Le::new(&b);
        assert_eq!(c.u32(), None);
        assert_eq!(c.pos(), 0);
        assert_eq!(c.u8(), Some(7));
        assert_eq!(c.u16(), Some(0x0201));
        assert_eq!(c.rest(), &[] as &[u8]);
        assert_eq!(c.take(usize::MAX), None, "no overflow");
        assert_eq!(u64_at(&b, usize::MAX), None);
        assert_eq!(f32_at(&1.5f32.to_le_bytes(), 0), Some(1.5));
    }
}
