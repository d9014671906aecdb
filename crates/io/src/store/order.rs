//! A table's rows in key order, on disk: (key, slot) pairs sorted by key, so that a hash
//! table can be shown row by row in key order (the CSR view) without holding its keys (a
//! table has 10^8+ of them) in memory.
//!
//! Built by an external merge sort: runs of at most `RUN` pairs are read in slot order,
//! sorted in memory and spilled to temporary files; the runs are then merged through a heap
//! into one file of `n` records of (key i64, slot u64), little-endian. Memory stays within
//! one run plus a read buffer per run, whatever `n`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Seek, Write};
use std::os::unix::fs::FileExt;

use super::keys::{KeyIndexError, ReadKeys};

/// Bytes per record.
const RECORD: usize = 16;
/// Pairs sorted in memory at once (16 bytes each).
const RUN: u64 = 1 << 21;
/// Keys asked of the caller at once.
const READ: u64 = 1 << 16;

/// Keys `0..n` in key order with the slot each came from.
pub struct KeyOrder {
    file: File,
    n: u64,
}

fn put(out: &mut impl Write, (key, slot): (i64, u64)) -> io::Result<()> {
    let mut r = [0u8; RECORD];
    r[..8].copy_from_slice(&key.to_le_bytes());
    r[8..].copy_from_slice(&slot.to_le_bytes());
    out.write_all(&r)
}

fn get(r: &[u8]) -> (i64, u64) {
    let w = |i: usize| -> [u8; 8] { r[i..i + 8].try_into().expect("8 bytes") };
    (i64::from_le_bytes(w(0)), u64::from_le_bytes(w(8)))
}

/// Reads the next record of a run, `None` at its end.
fn next(r: &mut impl Read) -> io::Result<Option<(i64, u64)>> {
    let mut b = [0u8; RECORD];
    match r.read_exact(&mut b) {
        Ok(()) => Ok(Some(get(&b))),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(e),
    }
}

impl KeyOrder {
    /// The order of the `n` keys `read` gives (slots asked for front to back).
    pub fn build(n: u64, read: &mut ReadKeys<'_>) -> Result<KeyOrder, KeyIndexError> {
        let mut runs = Vec::new();
        let mut pairs: Vec<(i64, u64)> = Vec::new();
        let mut keys = vec![0i64; READ.min(n) as usize];
        let mut slot = 0u64;
        while slot < n {
            let end = (slot + RUN).min(n);
            pairs.clear();
            while slot < end {
                let k = (end - slot).min(READ) as usize;
                read(slot, &mut keys[..k]).map_err(KeyIndexError::Keys)?;
                pairs.extend(keys[..k].iter().zip(slot..).map(|(&key, s)| (key, s)));
                slot += k as u64;
            }
            pairs.sort_unstable();
            let mut w = BufWriter::new(tempfile::tempfile()?);
            for &p in &pairs {
                put(&mut w, p)?;
            }
            let mut f = w.into_inner().map_err(|e| e.into_error())?;
            f.rewind()?;
            runs.push(f);
        }
        drop(pairs);
        let file = match runs.len() {
            0 => tempfile::tempfile()?,
            1 => runs.pop().expect("one run"),
            _ => merge(runs)?,
        };
        let order = KeyOrder { file, n };
        debug_assert_eq!(
            order.file.metadata().map(|m| m.len()).ok(),
            Some(n * RECORD as u64)
        );
        Ok(order)
    }

    /// The same order without the keys that are no rows: those in `sentinels`, and every
    /// key held more than once (a `DenseHashTable`'s sentinels when its graph is not known).
    /// One streaming pass; the order itself when nothing is dropped.
    pub fn rows_only(self, sentinels: &[i64]) -> io::Result<KeyOrder> {
        let mut r = BufReader::with_capacity(1 << 20, &self.file);
        let mut w = BufWriter::with_capacity(1 << 20, tempfile::tempfile()?);
        let mut kept = 0u64;
        // The record waiting to be written, and whether its key came again.
        let mut held: Option<((i64, u64), bool)> = None;
        let mut emit = |h: Option<((i64, u64), bool)>, w: &mut BufWriter<File>| match h {
            Some((p, false)) if !sentinels.contains(&p.0) => {
                kept += 1;
                put(w, p)
            }
            _ => Ok(()),
        };
        while let Some(p) = next(&mut r)? {
            match &mut held {
                Some((q, again)) if q.0 == p.0 => *again = true,
                _ => {
                    emit(held.take(), &mut w)?;
                    held = Some((p, false));
                }
            }
        }
        emit(held, &mut w)?;
        if kept == self.n {
            return Ok(self);
        }
        let file = w.into_inner().map_err(|e| e.into_error())?;
        debug_assert_eq!(
            file.metadata().map(|m| m.len()).ok(),
            Some(kept * RECORD as u64)
        );
        Ok(KeyOrder { file, n: kept })
    }

    pub fn len(&self) -> u64 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Records `first..first + out.len()` (`first + out.len() ≤ len()`).
    pub fn read(&self, first: u64, out: &mut [(i64, u64)]) -> io::Result<()> {
        if first
            .checked_add(out.len() as u64)
            .is_none_or(|e| e > self.n)
        {
            return Err(io::Error::other("key order: a read past its end"));
        }
        let mut buf = vec![0u8; out.len() * RECORD];
        self.file.read_exact_at(&mut buf, first * RECORD as u64)?;
        for (o, r) in out.iter_mut().zip(buf.chunks_exact(RECORD)) {
            *o = get(r);
        }
        Ok(())
    }
}

/// The sorted runs merged into one file.
fn merge(runs: Vec<File>) -> io::Result<File> {
    let mut readers: Vec<BufReader<File>> = runs
        .into_iter()
        .map(|f| BufReader::with_capacity(64 << 10, f))
        .collect();
    let mut heap = BinaryHeap::new();
    for (i, r) in readers.iter_mut().enumerate() {
        if let Some(p) = next(r)? {
            heap.push(Reverse((p, i)));
        }
    }
    let mut w = BufWriter::with_capacity(1 << 20, tempfile::tempfile()?);
    while let Some(Reverse((p, i))) = heap.pop() {
        put(&mut w, p)?;
        if let Some(q) = next(&mut readers[i])? {
            heap.push(Reverse((q, i)));
        }
    }
    w.into_inner().map_err(|e| e.into_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order_of(keys: &[i64]) -> KeyOrder {
        let mut read = |first: u64, out: &mut [i64]| {
            out.copy_from_slice(&keys[first as usize..first as usize + out.len()]);
            Ok(())
        };
        KeyOrder::build(keys.len() as u64, &mut read).unwrap()
    }

    #[test]
    fn keys_come_back_sorted_with_their_slots_across_runs() {
        let n = RUN as usize * 2 + 12345;
        let keys: Vec<i64> = (0..n as i64)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15u64 as i64))
            .collect();
        let o = order_of(&keys);
        assert_eq!(o.len(), n as u64);
        let mut got = vec![(0, 0); n];
        o.read(0, &mut got).unwrap();
        let mut want: Vec<(i64, u64)> = keys.iter().zip(0u64..).map(|(&k, s)| (k, s)).collect();
        want.sort_unstable();
        assert!(got == want);
        let mut some = [(0, 0); 3];
        o.read(n as u64 - 3, &mut some).unwrap();
        assert_eq!(some[..], want[n - 3..]);
        assert!(o.read(n as u64 - 2, &mut some).is_err());
        assert!(order_of(&[]).is_empty());
        let one = order_of(&[5, -1, 5]);
        let mut all = [(0, 0); 3];
        one.read(0, &mut all).unwrap();
        assert_eq!(all, [(-1, 1), (5, 0), (5, 2)]);
    }

    /// Sentinel keys and keys held more than once (every copy) are no rows.
    #[test]
    fn rows_only_drops_sentinels_and_repeated_keys() {
        let o = order_of(&[7, -1, 3, -1, -2, 9, -1, 3, 3])
            .rows_only(&[-2])
            .unwrap();
        let mut all = [(0, 0); 2];
        o.read(0, &mut all).unwrap();
        assert_eq!((o.len(), all), (2, [(7, 0), (9, 5)]));
        let same = order_of(&[4, 2]).rows_only(&[]).unwrap();
        assert_eq!(same.len(), 2);
        assert!(order_of(&[-1, -1]).rows_only(&[]).unwrap().is_empty());
    }
}
