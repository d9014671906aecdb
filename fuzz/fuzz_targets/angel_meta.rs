#![no_main]
//! An Angel meta file: the envelope checks (`read_envelope`) then JSON decoding and the
//! meta-only validation (`parse_meta`). Bytes starting with `{` also go straight to
//! `parse_meta`, so the JSON decoder is reached without the length header.

use libfuzzer_sys::fuzz_target;
use modelfs_angel::{parse_meta, read_envelope};
use modelfs_io::source::MemSource;

fuzz_target!(|data: &[u8]| {
    if data.first() == Some(&b'{') {
        let _ = parse_meta(data);
    }
    let src = MemSource::new("_meta", data.to_vec());
    if let Ok(json) = read_envelope(&src) {
        assert!(json.len() <= data.len());
        if let Ok(meta) = parse_meta(&json) {
            // Validated metas have parts sorted by id and rows sorted by row id.
            assert!(meta.parts.windows(2).all(|w| w[0].part_id < w[1].part_id));
            for p in &meta.parts {
                assert!(p.rows.windows(2).all(|w| w[0].0 < w[1].0));
            }
        }
    }
});
