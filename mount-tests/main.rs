//! Tests that mount for real (see README). Set MODELFS_REQUIRE_FUSE=1 to turn a missing
//! /dev/fuse into a failure instead of a skip.
