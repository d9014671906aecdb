//! `fs::push` without FUSE: a sink that records each store, checked against the content.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::push::{Follow, Pusher, Sink};
use modelfs_io::source::cursor::Cursor;
use modelfs_layout::held::Whole;
use modelfs_layout::FileContent;

const MIB: u64 = 1 << 20;
const INO: u64 = 7;

#[derive(Default)]
struct Recorder(Mutex<Vec<(u64, u64, Vec<u8>)>>);

impl Sink for Recorder {
    fn store(&self, ino: u64, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.0.lock().unwrap().push((ino, offset, data.to_vec()));
        Ok(())
    }
}

impl Recorder {
    /// Bytes of each page stored: `[from, to)` covered, in pages.
    fn covered(&self) -> Vec<(u64, u64)> {
        let mut spans: Vec<(u64, u64)> = self
            .0
            .lock()
            .unwrap()
            .iter()
            .map(|(_, at, d)| (*at, at + d.len() as u64))
            .collect();
        spans.sort();
        spans
    }
}

fn content(len: usize) -> (Bytes, Arc<dyn FileContent>) {
    let bytes: Bytes = (0..len)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect::<Vec<u8>>()
        .into();
    (bytes.clone(), Arc::new(Whole(bytes)))
}

fn pusher(ahead: u64) -> (Pusher, Arc<Recorder>) {
    let p = Pusher::new(ahead, ahead);
    let rec = Arc::new(Recorder::default());
    p.start(rec.clone(), 2);
    (p, rec)
}

/// Waits until `n` bytes were stored and nothing more comes for a moment.
/// What an open file of `INO` holds for the pusher: its liveness token, its read-ahead
/// cursor, and its follower.
fn open_file(p: &Pusher) -> (Arc<()>, Arc<Cursor>, Follow) {
    (Arc::new(()), Arc::new(Cursor::default()), p.follower(INO))
}

fn settle(p: &Pusher, n: u64) {
    let t = Instant::now();
    while p.stored() < n && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
}

/// Every store starts on a page, holds the file's own bytes and no byte is stored twice.
fn check_stores(rec: &Recorder, bytes: &Bytes) {
    for (ino, at, d) in rec.0.lock().unwrap().iter() {
        assert_eq!(*ino, INO);
        assert_eq!(at % 4096, 0, "a store at {at}");
        let end = *at as usize + d.len();
        assert!(
            d.len() % 4096 == 0 || end == bytes.len(),
            "a store of {}",
            d.len()
        );
        assert!(
            d[..] == bytes[*at as usize..end],
            "bytes stored at {at} differ"
        );
    }
    let spans = rec.covered();
    for w in spans.windows(2) {
        assert!(w[0].1 <= w[1].0, "stored twice: {w:?}");
    }
}

#[test]
fn a_sequential_reader_gets_a_window_ahead_and_no_byte_twice() {
    let (bytes, c) = content(64 * MIB as usize);
    let (p, rec) = pusher(1 << 30);
    let (live, cursor, follow) = open_file(&p);
    for i in 0..8u64 {
        let at = i * 128 * 1024;
        p.follow(
            &follow,
            INO,
            &c,
            64 * MIB,
            (at, at + 128 * 1024),
            (&live, &cursor),
        );
    }
    settle(&p, 8 * MIB);
    check_stores(&rec, &bytes);
    let spans = rec.covered();
    let end = spans.iter().map(|s| s.1).max().unwrap();
    assert!(end >= 8 * MIB, "pushed only up to {end}");
    assert!(end < 64 * MIB, "a sequential reader got the whole file");
}

#[test]
fn a_reader_that_jumps_about_gets_the_whole_file_once() {
    let (bytes, c) = content(16 * MIB as usize + 1000);
    let size = bytes.len() as u64;
    let (p, rec) = pusher(1 << 30);
    let (live, cursor, follow) = open_file(&p);
    for at in [9 * MIB, MIB, 14 * MIB, 5 * MIB, 12 * MIB, 2 * MIB] {
        p.follow(&follow, INO, &c, size, (at, at + 4096), (&live, &cursor));
    }
    settle(&p, size);
    check_stores(&rec, &bytes);
    let covered: u64 = rec.covered().iter().map(|s| s.1 - s.0).sum();
    assert_eq!(covered, size, "the file is stored whole, once");
    // A second open of the same file shares what was queued.
    let again = p.follower(INO);
    for at in [9 * MIB, MIB, 14 * MIB, 5 * MIB] {
        p.follow(&again, INO, &c, size, (at, at + 4096), (&live, &cursor));
    }
    settle(&p, size);
    assert_eq!(p.stored(), size, "pushed again for a second open");
}

#[test]
fn a_file_bigger_than_ahead_is_not_pushed_whole() {
    let (_, c) = content(16 * MIB as usize);
    let (p, _) = pusher(8 * MIB);
    let (live, cursor, follow) = open_file(&p);
    for at in [9 * MIB, MIB, 14 * MIB, 5 * MIB, 12 * MIB] {
        p.follow(
            &follow,
            INO,
            &c,
            16 * MIB,
            (at, at + 4096),
            (&live, &cursor),
        );
    }
    settle(&p, 0);
    assert_eq!(p.stored(), 0);
}

#[test]
fn pushes_for_a_closed_file_are_dropped_and_ahead_0_pushes_nothing() {
    let (_, c) = content(64 * MIB as usize);
    let (p, _) = pusher(1 << 30);
    let (live, cursor, follow) = open_file(&p);
    // Closed before the push threads could take much of it.
    for at in [9 * MIB, MIB, 40 * MIB, 5 * MIB] {
        p.follow(
            &follow,
            INO,
            &c,
            64 * MIB,
            (at, at + 4096),
            (&live, &cursor),
        );
    }
    drop(live);
    settle(&p, 0);
    assert!(p.stored() < 64 * MIB, "a closed file was pushed whole");

    let (off, rec) = pusher(0);
    let (live, cursor, follow) = open_file(&off);
    for i in 0..8u64 {
        off.follow(
            &follow,
            INO,
            &c,
            64 * MIB,
            (i * 4096, (i + 1) * 4096),
            (&live, &cursor),
        );
    }
    settle(&off, 0);
    assert!(rec.0.lock().unwrap().is_empty());
}
