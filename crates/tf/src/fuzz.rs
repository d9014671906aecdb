//! Entry points for the fuzz targets (`fuzz/fuzz_targets/`): each drives a parser on arbitrary
//! bytes the way a mount does — parse, list, render, read — so that a crash, a hang or a huge
//! allocation shows up under the fuzzer. Nothing here checks results: any `Err` is fine.

use std::sync::Arc;

use crate::graph::scan::{scan, GraphKind};
use crate::graph::tensor_proto::{self, ProtoTensor};
use crate::model::testing::{fuzz_touch, fuzz_walk};
use crate::source::{MemSource, ReadAt};

/// The three messages a graph file may be.
const KINDS: [GraphKind; 3] = [
    GraphKind::GraphDef,
    GraphKind::MetaGraphDef,
    GraphKind::SavedModel,
];

/// A graph in the protobuf text format as each of the three messages: parsed into wire bytes
/// (`pbtxt::parse`), then scanned, listed and read like a binary one.
pub fn graph_text(data: &[u8]) {
    let file: Arc<dyn ReadAt> = Arc::new(MemSource::new("fuzz.pbtxt", data.to_vec()));
    for kind in KINDS {
        let model = crate::graph::GraphModel::new(file.clone(), kind, true, None);
        fuzz_walk(&model);
    }
}

/// A graph file as each of the three messages: scan, signatures, constants, `graph.pbtxt`.
pub fn graph(data: &[u8]) {
    let file: Arc<dyn ReadAt> = Arc::new(MemSource::new("fuzz.pb", data.to_vec()));
    for kind in KINDS {
        let model = crate::graph::GraphModel::new(file.clone(), kind, false, None);
        fuzz_walk(&model);
        if let Ok(s) = scan(data, kind) {
            for m in &s.metas {
                if let Some(r) = &m.graph {
                    let r = r.start as usize..r.end as usize;
                    if let Ok(c) = crate::graph::pbtxt::Chunking::new(data, r, 512) {
                        let mut out = Vec::new();
                        for k in 0..c.chunks() {
                            if c.render(data, k, &mut out).is_err() || out.len() > 64 << 20 {
                                break;
                            }
                        }
                    }
                }
            }
        }
    }
}

/// One `TensorProto`: its fields, then values read as a constant's would be.
pub fn tensor_proto(data: &[u8]) {
    let Ok(info) = tensor_proto::scan(data, 0..data.len(), 0) else {
        return;
    };
    let file: Arc<dyn ReadAt> = Arc::new(MemSource::new("fuzz.pb", data.to_vec()));
    let meta = ProtoTensor::graph_meta("c", "Const", &*file);
    fuzz_touch(&ProtoTensor::new(file, info, meta));
}

/// A `TrackableObjectGraph`.
pub fn object_graph(data: &[u8]) {
    let _ = crate::object_graph::parse(data);
}

/// A V1 checkpoint file (an SSTable of `SavedTensorSlices`): open, list, read.
pub fn v1(data: &[u8]) {
    let file: Arc<dyn ReadAt> = Arc::new(MemSource::new("fuzz.ckpt", data.to_vec()));
    let cache = Arc::new(crate::codec::table::BlockCache::new(1 << 20));
    let Ok(table) = crate::codec::table::Table::open(file, cache) else {
        return;
    };
    let Ok(model) = crate::v1::V1Model::open(
        vec![("fuzz.ckpt".into(), table)],
        std::time::SystemTime::UNIX_EPOCH,
    ) else {
        return;
    };
    fuzz_walk(&model);
}
