#![no_main]
//! The eight Angel decoders. Input (see `seed.sh`):
//! `format selector byte ‖ u32 LE meta length ‖ meta JSON ‖ data file bytes`.
//! The meta must pass `parse_meta`; a selector < 8 then overrides its format, so one valid
//! meta exercises every decoder. Every partition is decoded against the data bytes (all
//! partitions share the one file), and the decoded partitions are merged. Reading a partition
//! by range (`decode_by_range`, what reads use) gives the same entries whenever the whole
//! decode succeeds.

use libfuzzer_sys::fuzz_target;
use modelfs_angel::decode::{decode_partition, expected_records, PartInput};
use modelfs_angel::merge::merge;
use modelfs_angel::{decode_by_range, parse_meta};
use modelfs_io::codec::angel::AngelFormat;
use modelfs_io::source::MemSource;

fuzz_target!(|input: &[u8]| {
    if input.len() < 5 {
        return;
    }
    let selector = input[0];
    let n = u32::from_le_bytes(input[1..5].try_into().unwrap()) as usize;
    let rest = &input[5..];
    let (json, data) = rest.split_at(n.min(rest.len()));
    let Ok(mut meta) = parse_meta(json) else {
        return;
    };
    if let Some(&f) = AngelFormat::ALL.get(usize::from(selector & 0x0f)) {
        meta.format = f;
    }
    let sep = match selector >> 4 {
        1 => ",",
        2 => " ",
        3 => "\t",
        _ => "",
    };
    let file = MemSource::new("0", data.to_vec());
    let mut decoded = Vec::new();
    let mut lines_before = 0u64;
    for part in meta.parts.iter().take(16) {
        let inp = PartInput {
            meta: &meta,
            part,
            file: &file,
            sep,
            lines_before,
        };
        let by_range = decode_by_range(&inp);
        if let Ok(rows) = decode_partition(&inp) {
            let r = by_range.expect("whole decode succeeded, by range failed");
            assert_eq!((&r.rows, &r.row_ptr, &r.cols), (&rows.rows, &rows.row_ptr, &rows.cols));
            assert_eq!(r.values, rows.values);
            // CSR invariants.
            assert_eq!(rows.row_ptr.len(), rows.rows.len() + 1);
            assert!(rows.rows.windows(2).all(|w| w[0] < w[1]));
            assert_eq!(
                rows.values.len(),
                rows.cols.len() * meta.row_type.value.width()
            );
            assert_eq!(*rows.row_ptr.last().unwrap(), rows.cols.len() as u64);
            decoded.push(rows);
        }
        lines_before =
            lines_before.saturating_add(expected_records(meta.format, part).unwrap_or(0));
    }
    let refs: Vec<_> = decoded.iter().collect();
    let _ = merge(&refs, meta.row_type.value.width());
});
