//! TensorFlow graphs (SPEC §6, formats/tf-checkpoint.md §11): the protobuf wire format read in
//! place (`wire`), `TensorProto` values as tensors (`tensor_proto`), one scan of a graph file
//! for its constants and signatures (`scan`), and the model that shows them (`model`).

mod dense;
mod encoded;
pub(crate) mod model;
pub(crate) mod pbtxt;
pub(crate) mod scan;
mod signatures;
pub(crate) mod sniff;
pub(crate) mod tensor_proto;

pub(crate) use model::GraphModel;
pub(crate) use scan::GraphKind;
