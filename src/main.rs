fn main() {
    tune_allocator();
    std::process::exit(modelfs::main());
}

/// Remote blocks (8 MiB) and read buffers are allocated and freed at a high rate; glibc serves
/// such sizes with fresh `mmap`s (and trims freed heap), so every one costs page faults and
/// zeroing: a third of a remote `cat`'s time. Keeping them in the heap makes reuse free; the
/// memory stays bounded by the caches that hold the blocks.
fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 512 << 20);
    }
}
