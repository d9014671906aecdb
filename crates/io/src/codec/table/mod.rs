//! The `.index` table (§3): a LevelDB SSTable with a bytewise comparator, read lazily; and
//! written (`writer`: the TF writer, the `.tf/` view and the tests build indexes with it). One
//! home for the format's encode and decode, as LevelDB's `table/`.
//!
//! `Table::open` reads only the footer and the index block (kept decoded in the table, one
//! entry per data block). Data blocks are read on demand and kept in the shared `BlockCache`.
//! Invariants checked when a data block is first decoded: the block itself is valid (see
//! `block`), and every key of block `i` lies in `(separator[i-1], separator[i]]`; separators
//! are strictly increasing, so keys are strictly increasing across the whole table.

pub mod block;
pub mod cache;
pub mod footer;
pub mod format;
mod writer;

use std::sync::Arc;

use crate::source::{ReadAt, ReadExt, SourceError};
use block::{Block, BlockIter};
pub use cache::BlockCache;
use footer::{BlockHandle, Footer, FOOTER_LEN};
#[cfg(test)]
pub(crate) use writer::build_block;
pub use writer::{TableBuilder, TABLE_MAGIC};

/// An owned (key, value) pair.
pub type KeyValue = (Vec<u8>, Vec<u8>);

#[derive(Debug, thiserror::Error)]
pub enum TableError {
    /// The file is not a table at all (too short, wrong magic).
    #[error("{0}")]
    NotATable(String),
    #[error("{0}")]
    Corrupt(String),
    #[error("{file}: {source} (block at offset {offset})")]
    Block {
        file: String,
        offset: u64,
        #[source]
        source: block::BlockError,
    },
    // Not `transparent`: the source fault stays a link of the chain (`source::is_transient`).
    #[error("{0}")]
    Source(#[from] SourceError),
}

/// One index entry: a separator (not a key!) and the handle of its data block.
#[derive(Clone, Debug)]
struct OffsetsEntry {
    separator: Vec<u8>,
    handle: BlockHandle,
}

pub struct Table {
    id: u64,
    file: Arc<dyn ReadAt>,
    cache: Arc<BlockCache>,
    index: Vec<OffsetsEntry>,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("file", &self.file.name())
            .field("blocks", &self.index.len())
            .finish()
    }
}

impl Table {
    /// Reads the footer and the index block of `file`.
    pub fn open(file: Arc<dyn ReadAt>, cache: Arc<BlockCache>) -> Result<Table, TableError> {
        let name = file.name().to_string();
        let len = file.size();
        if len < FOOTER_LEN {
            return Err(TableError::NotATable(format!(
                "{name}: not a TensorFlow checkpoint index, or a truncated one (file is {len} bytes, \
                 shorter than a table footer)"
            )));
        }
        let footer_bytes = file.read_vec(len - FOOTER_LEN, FOOTER_LEN as usize)?;
        let footer = Footer::decode(&footer_bytes, len).map_err(|e| match e {
            // A checkpoint index cut short (a copy or an upload that stopped) loses its footer
            // too: say so, it is the likelier case for a file named like an index.
            TableError::NotATable(m) => TableError::NotATable(format!(
                "{name}: not a TensorFlow checkpoint index, or a truncated one ({m})"
            )),
            TableError::Corrupt(m) => TableError::Corrupt(format!("{name}: {m}")),
            other => other,
        })?;
        let index_block = format::read_block(&*file, footer.index)?;
        let limit = len - FOOTER_LEN;
        let mut index = Vec::with_capacity(index_block.len);
        let mut it = BlockIter::new(Arc::new(index_block));
        while it.advance() {
            // Extra bytes after the handle are allowed (§3.4).
            let (handle, _) = BlockHandle::decode(it.value()).ok_or_else(|| {
                TableError::Corrupt(format!("{name}: unreadable block handle in the index"))
            })?;
            handle
                .check_within(limit, "data")
                .map_err(|e| TableError::Corrupt(format!("{name}: {e}")))?;
            index.push(OffsetsEntry {
                separator: it.key().to_vec(),
                handle,
            });
        }
        Ok(Table {
            id: cache::new_table_id(),
            file,
            cache,
            index,
        })
    }

    pub fn file(&self) -> &Arc<dyn ReadAt> {
        &self.file
    }

    /// Number of data blocks.
    #[cfg(any(test, feature = "testkit"))]
    pub fn num_blocks(&self) -> usize {
        self.index.len()
    }

    /// Data block `i`, from the cache or decoded (and checked against its separators).
    fn block(&self, i: usize) -> Result<Arc<Block>, TableError> {
        let entry = &self.index[i];
        let key = (self.id, entry.handle.offset);
        if let Some(b) = self.cache.get(key) {
            return Ok(b);
        }
        let block = format::read_block(&*self.file, entry.handle)?;
        if !block.is_empty() {
            let below_prev = i > 0 && block.first_key <= self.index[i - 1].separator;
            if below_prev || block.last_key > entry.separator {
                return Err(TableError::Corrupt(format!(
                    "{}: keys not in order (data block at offset {} lies outside its index range)",
                    self.file.name(),
                    entry.handle.offset
                )));
            }
        }
        let block = Arc::new(block);
        self.cache.insert(key, Arc::clone(&block));
        Ok(block)
    }

    pub fn iter(&self) -> TableIter<'_> {
        TableIter {
            table: self,
            block_idx: 0,
            block_iter: None,
        }
    }

    /// The value stored under exactly `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, TableError> {
        let mut it = self.iter();
        it.seek(key)?;
        Ok((it.valid() && it.key() == key).then(|| it.value().to_vec()))
    }
}

/// A two-level iterator: index entry → data block → entries. Starts unpositioned; call
/// `seek` or `seek_to_first`, then `valid` / `key` / `value` / `next`.
pub struct TableIter<'a> {
    table: &'a Table,
    block_idx: usize,
    block_iter: Option<BlockIter>,
}

impl TableIter<'_> {
    pub fn seek_to_first(&mut self) -> Result<(), TableError> {
        self.seek(&[])
    }

    /// Positions at the first key ≥ `target`. Only the one block that can hold it is read
    /// (plus following ones if it holds nothing ≥ target, which only happens at its end).
    pub fn seek(&mut self, target: &[u8]) -> Result<(), TableError> {
        let idx = self
            .table
            .index
            .partition_point(|e| e.separator.as_slice() < target);
        self.block_idx = idx;
        self.block_iter = None;
        if idx >= self.table.index.len() {
            return Ok(());
        }
        let mut bi = BlockIter::new(self.table.block(idx)?);
        let found = bi.seek(target);
        self.block_iter = Some(bi);
        if !found {
            self.next_block()?;
        }
        Ok(())
    }

    /// Moves to the first entry of the next non-empty block (or the end).
    fn next_block(&mut self) -> Result<(), TableError> {
        loop {
            self.block_idx += 1;
            self.block_iter = None;
            if self.block_idx >= self.table.index.len() {
                return Ok(());
            }
            let mut bi = BlockIter::new(self.table.block(self.block_idx)?);
            if bi.advance() {
                self.block_iter = Some(bi);
                return Ok(());
            }
        }
    }

    pub fn valid(&self) -> bool {
        self.block_iter.as_ref().is_some_and(|b| b.valid())
    }

    pub fn key(&self) -> &[u8] {
        self.block_iter.as_ref().map_or(&[], |b| b.key())
    }

    pub fn value(&self) -> &[u8] {
        self.block_iter.as_ref().map_or(&[], |b| b.value())
    }

    /// Advances to the next entry (no-op at the end). A cursor step that can fail, as in
    /// LevelDB's iterators, not `Iterator::next` (`next_entry` is the owned-pair form).
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<(), TableError> {
        match &mut self.block_iter {
            Some(b) if b.valid() => {
                if !b.advance() {
                    self.next_block()?;
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Convenience: the current entry as owned bytes, then advance.
    pub fn next_entry(&mut self) -> Option<Result<KeyValue, TableError>> {
        if !self.valid() {
            return None;
        }
        let entry = (self.key().to_vec(), self.value().to_vec());
        match self.next() {
            Ok(()) => Some(Ok(entry)),
            Err(e) => {
                self.block_iter = None;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests;
#[cfg(any(test, feature = "testkit"))]
pub mod testutil;
