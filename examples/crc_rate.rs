//! Benchmark baseline: the single-core CRC32C rate (the `crc32c` crate modelfs uses, with the
//! CPU's instruction when it has one) over a buffer already in memory.
//!
//! `crc_rate [MIB]` prints `bytes=B seconds=S` (used by scripts/bench.sh).

use std::time::Instant;

fn main() {
    let mib: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(256);
    let buf: Vec<u8> = (0..mib << 20).map(|i| (i * 31 % 251) as u8).collect();
    let mut crc = crc32c::crc32c(&buf[..1 << 20]);
    let start = Instant::now();
    let rounds = 8;
    for _ in 0..rounds {
        for chunk in buf.chunks(4 << 20) {
            crc = crc32c::crc32c_append(crc, chunk);
        }
    }
    let s = start.elapsed().as_secs_f64();
    println!("bytes={} seconds={s:.6} crc={crc:08x}", rounds * buf.len());
}
