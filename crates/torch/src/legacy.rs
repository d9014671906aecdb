//! The legacy `torch.save` format: what torch wrote before 1.6, and writes today with
//! `_use_new_zipfile_serialization=False`. Five pickles in a row — the magic number, the
//! protocol version (1001), the system info (`little_endian`), the object, the list of storage
//! keys — then every storage of that list, in its order: its element count (8 bytes,
//! little-endian) and its bytes.
//!
//! Nothing says where a storage starts but the counts of those before it. The object's
//! persistent ids, `('storage', type, key, location, numel[, view])`, give each storage's count
//! and width, so where every storage is follows from the pickles alone (no read of tensor
//! data at mount); the layout is confirmed by its end being the file's end, else each count
//! is read in turn. Every storage's own count is checked again on its first read.

use std::collections::HashMap;
use std::sync::Arc;

use super::pickle::{self, Pickle, PickleError, Value};
use super::tensor::Storage;
use crate::model::ModelError;
use crate::source::{ReadAt, ReadExt};

/// The magic number's pickle after its `PROTO` (and protocol 4's `FRAME`): `LONG1` of 10 bytes.
const MAGIC_BINARY: &[u8] = b"\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.";
/// The same in protocols 0 and 1.
const MAGIC_TEXT: &[u8] = b"L119547037146038801333356L\n.";
const PROTOCOL_VERSION: i64 = 1001;
/// The first read of the pickles (a state dict's are a few bytes per tensor), grown fourfold
/// until they fit, up to `super::MAX_PICKLE`: a mount reads them and next to no tensor data.
const FIRST_READ: u64 = 64 << 10;
/// The most storages walked count by count when the layout does not follow from the pickles.
const MAX_WALKED: usize = 1 << 20;

/// Whether `head` (the file's first bytes) starts with the legacy format's magic number.
pub(crate) fn is_legacy(head: &[u8]) -> bool {
    let mut h = head;
    if let [0x80, _, rest @ ..] = h {
        h = rest;
    }
    if let [0x95, rest @ ..] = h {
        h = rest.get(8..).unwrap_or(&[]);
    }
    h.starts_with(MAGIC_BINARY) || h.starts_with(MAGIC_TEXT)
}

/// A legacy file, read up to its storages.
pub(crate) struct Legacy {
    pub(crate) object: Pickle,
    pub(crate) storages: HashMap<String, Arc<Storage>>,
    pub(crate) big_endian: bool,
    /// What is wrong with the file as a whole (its storages' layout).
    pub(crate) problems: Vec<String>,
}

/// A storage as the object's persistent ids describe it.
struct Described {
    numel: u64,
    width: u64,
}

/// Reads the pickles of the legacy file `file` and where its storages are.
pub(crate) fn read(file: &dyn ReadAt) -> Result<Legacy, ModelError> {
    let bad = |why: String| ModelError::data(file.name(), why);
    let mut want = FIRST_READ.min(file.size());
    let (pickles, end) = loop {
        let head = file.read_vec(0, want as usize)?;
        match pickles(&head) {
            Ok(p) => break p,
            Err(PickleError::Truncated) if want < file.size() && want < super::MAX_PICKLE => {
                want = want
                    .saturating_mul(4)
                    .min(file.size())
                    .min(super::MAX_PICKLE);
            }
            Err(e) => {
                return Err(bad(format!(
                    "a legacy torch.save file whose pickles are damaged: {e}"
                )))
            }
        }
    };
    let [_, version, info, object, keys] = pickles;
    match version.get(version.root) {
        Value::Int(PROTOCOL_VERSION) => {}
        other => {
            return Err(bad(format!(
                "legacy torch.save protocol {other:?}, not 1001"
            )))
        }
    }
    let big_endian = match info.get(info.root) {
        Value::Dict(pairs) => pairs.iter().any(|&(k, v)| {
            info.get(k) == &Value::Str("little_endian".into()) && info.get(v) == &Value::Bool(false)
        }),
        _ => false,
    };
    let Value::List(key_ids) = keys.get(keys.root) else {
        return Err(bad("its list of storage keys is not a list".into()));
    };
    let order: Vec<String> = key_ids
        .iter()
        .map(|&k| key_text(keys.get(k)))
        .collect::<Option<_>>()
        .ok_or_else(|| bad("a storage key that is not a string".into()))?;
    let described = described(&object);
    let mut problems = Vec::new();
    let layout = match from_ids(&order, &described, end as u64) {
        Some(layout) if layout.end == file.size() => layout.storages,
        computed => {
            // The pickles do not account for the file: read each count (a file written by a
            // torch whose ids say something else, or a damaged one).
            let walked = walk_counts(file, &order, &described, end as u64)?;
            if walked.end != file.size() {
                problems.push(format!(
                    "its storages end at byte {} ({} by the pickle's counts), the file at {}",
                    walked.end,
                    computed.map_or("overflowing".into(), |c| c.end.to_string()),
                    file.size()
                ));
            }
            walked.storages
        }
    };
    let storages = layout
        .into_iter()
        .map(|(key, count, numel, len)| {
            let s = Storage::counted(key.clone(), count, numel, len);
            (key, Arc::new(s))
        })
        .collect();
    Ok(Legacy {
        object,
        storages,
        big_endian,
        problems,
    })
}

/// The five pickles at the start of `head`, and where the storages start.
fn pickles(head: &[u8]) -> Result<([Pickle; 5], usize), PickleError> {
    let mut at = 0;
    let mut next = || -> Result<Pickle, PickleError> {
        let rest = head.get(at..).ok_or(PickleError::Truncated)?;
        let (p, used) = pickle::load_prefix(rest)?;
        at += used;
        Ok(p)
    };
    let all = [next()?, next()?, next()?, next()?, next()?];
    Ok((all, at))
}

fn key_text(v: &Value) -> Option<String> {
    match v {
        Value::Str(s) => Some(s.clone()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

/// Every storage the object's persistent ids name, with its count and width.
fn described(object: &Pickle) -> HashMap<String, Described> {
    let mut out = HashMap::new();
    for v in object.values() {
        let Value::Persistent(pid) = v else { continue };
        let Value::Tuple(items) = object.get(*pid) else {
            continue;
        };
        let get = |i: usize| items.get(i).map(|&x| object.get(x));
        let (Some(Value::Str(tag)), Some(Value::Global(_, class)), Some(key), Some(Value::Int(n))) =
            (get(0), get(1), get(2), get(4))
        else {
            continue;
        };
        let (Some(key), Some(width), Ok(numel)) = (
            key_text(key),
            super::walk::storage_width(class),
            u64::try_from(*n),
        ) else {
            continue;
        };
        if tag == "storage" {
            out.insert(key, Described { numel, width });
        }
    }
    out
}

/// Storages by key: where its count is, its element count and its length in bytes.
struct Layout {
    storages: Vec<(String, u64, u64, u64)>,
    end: u64,
}

/// The layout the persistent ids give, storages from `start` on; `None` if a key has no id
/// or the counts overflow.
fn from_ids(
    order: &[String],
    described: &HashMap<String, Described>,
    start: u64,
) -> Option<Layout> {
    let mut at = start;
    let mut storages = Vec::with_capacity(order.len().min(MAX_WALKED));
    for key in order {
        let d = described.get(key)?;
        let len = d.numel.checked_mul(d.width)?;
        storages.push((key.clone(), at, d.numel, len));
        at = at.checked_add(8)?.checked_add(len)?;
    }
    Some(Layout { storages, end: at })
}

/// The layout read count by count from `start`; a storage the ids do not describe is taken
/// as bytes (width 1). Stops where a count points past the file.
fn walk_counts(
    file: &dyn ReadAt,
    order: &[String],
    described: &HashMap<String, Described>,
    start: u64,
) -> Result<Layout, ModelError> {
    let mut at = start;
    let mut storages = Vec::new();
    for key in order.iter().take(MAX_WALKED) {
        if at.checked_add(8).is_none_or(|e| e > file.size()) {
            break;
        }
        let numel = u64::from_le_bytes(file.read_vec(at, 8)?[..8].try_into().expect("8 bytes"));
        let width = described.get(key).map_or(1, |d| d.width);
        let Some(end) = numel
            .checked_mul(width)
            .and_then(|len| at.checked_add(8)?.checked_add(len).map(|e| (len, e)))
            .filter(|&(_, e)| e <= file.size())
        else {
            break;
        };
        storages.push((key.clone(), at, numel, end.0));
        at = end.1;
    }
    Ok(Layout { storages, end: at })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_magic_number_in_every_protocol() {
        // pickle.dumps(0x1950a86a20f9469cfc6c, protocol=p) for p = 0, 2, 4.
        assert!(is_legacy(b"L119547037146038801333356L\n."));
        assert!(is_legacy(
            b"\x80\x02\x8a\nl\xfc\x9cF\xf9 j\xa8P\x19.\x80\x02M\xe9\x03."
        ));
        assert!(is_legacy(
            b"\x80\x04\x95\r\x00\x00\x00\x00\x00\x00\x00\x8a\nl\xfc\x9cF\xf9 j\xa8P\x19."
        ));
        assert!(!is_legacy(b"\x80\x02\x8a\nl\xfc\x9cF\xf9 j\xa8P\x18."));
        assert!(!is_legacy(b"PK\x03\x04"));
        assert!(!is_legacy(b""));
    }
}
