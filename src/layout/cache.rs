//! Memory-bounded LRU of rendered chunks and chunk-offset indexes.

/// Placeholder; the layout module owns its design.
pub struct ChunkCache;
