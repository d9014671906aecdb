//! The Angel model directory reader (formats/angel.md).
