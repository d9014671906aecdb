//! The corruption suite: truncated, flipped, deleted and overflowing source files never make
//! modelfs panic, hang, allocate beyond the files' size or serve wrong bytes; affected tensors
//! fail with an error naming the file, unaffected ones read exactly as before.
//!
//! Every case runs on its own thread under `harness::run_case` (panic, hang and allocation
//! checks); the tests of this binary run one at a time (`harness::serial`) so that the
//! process-wide allocation peak belongs to one case.

#[path = "corruption/angel.rs"]
mod angel;
#[path = "corruption/cache.rs"]
mod cache;
#[path = "corruption/graphs.rs"]
mod graphs;
#[path = "corruption/harness.rs"]
mod harness;
#[path = "corruption/tf.rs"]
mod tf;

#[global_allocator]
static ALLOC: harness::Counting = harness::Counting;
