//! `Read + Seek` over a `ReadAt`, for crates that parse a container by streaming it (the zip
//! directories of `.npz` and `torch.save` files). It reads only what its caller asks for.

use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;

use super::{ReadAt, ReadExt};

pub struct Seekable {
    file: Arc<dyn ReadAt>,
    pos: u64,
}

impl Seekable {
    pub fn new(file: &Arc<dyn ReadAt>) -> Seekable {
        Seekable {
            file: Arc::clone(file),
            pos: 0,
        }
    }
}

impl Read for Seekable {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let left = self.file.size().saturating_sub(self.pos);
        let n = (buf.len() as u64).min(left) as usize;
        if n == 0 {
            return Ok(0);
        }
        // Containers' directories and headers: metadata reads (no read-ahead).
        let got = self
            .file
            .read_vec(self.pos, n)
            .map_err(std::io::Error::other)?;
        buf[..n].copy_from_slice(&got);
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for Seekable {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        let pos = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.file.size().checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = pos.ok_or_else(|| std::io::Error::other("seek before the start"))?;
        Ok(self.pos)
    }
}
