//! One numpy array stored uncompressed (a `.npy` file, or a stored member of an `.npz`): its
//! bytes start at `data` of the file, in C or Fortran order, little- or big-endian. Reads give
//! row-major little-endian elements, as every other reader's do.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use super::inflate::Inflated;
use super::npy::{dtype_of, NpyHeader};
use crate::model::strided::Strided;
use crate::model::{base_name, debug_check, DType, ModelError, Tensor, TensorMeta};
use crate::source::{ReadAt, ReadCtx, ReadExt};

pub(crate) struct NpyTensor {
    meta: TensorMeta,
    file: Arc<dyn ReadAt>,
    /// Where element 0 is in the file.
    data: u64,
    big_endian: bool,
    fortran: bool,
    identity: Option<String>,
    /// A stored `.npz` member's zip CRC-32 over `[at, end)` (its whole `.npy`), checked on the
    /// first read before any byte is served; the verdict is kept.
    crc: Option<Member>,
    verdict: OnceLock<Result<(), String>>,
    /// A deflated member: `data` is then an offset in its uncompressed stream.
    inflated: Option<Arc<Inflated>>,
}

/// Where a member's bytes are and their CRC-32.
#[derive(Clone, Copy)]
pub(crate) struct Member {
    pub(crate) at: u64,
    pub(crate) end: u64,
    pub(crate) crc: u32,
}

/// Bytes inflated per step of a Fortran-order deflated member's pass.
const STEP_BYTES: usize = 256 << 10;

impl NpyTensor {
    /// The elements are served as stored: little-endian, C order, not bools, not deflated.
    fn plain(&self) -> bool {
        !self.fortran
            && !self.big_endian
            && self.meta.dtype != DType::Bool
            && self.inflated.is_none()
            && self.meta.problem.is_none()
    }

    /// The array of `name` whose header `h` starts at `at` of `file`, its data ending by `end`
    /// (the file's size, or the end of its `.npz` member).
    pub(crate) fn new(
        name: &str,
        h: &NpyHeader,
        at: u64,
        end: u64,
        file: &Arc<dyn ReadAt>,
    ) -> NpyTensor {
        let mut extra = serde_json::Map::new();
        // The base name, as a TF partition's `"file"`: two copies of a model give the same `.json`.
        extra.insert("file".into(), base_name(file.name()).into());
        extra.insert("descr".into(), h.descr.clone().into());
        extra.insert("fortran_order".into(), h.fortran.into());
        let data = at.saturating_add(h.data_offset);
        extra.insert("data_start".into(), data.into());
        let (dtype, big_endian, mut problem) = match dtype_of(&h.descr) {
            Ok((d, big)) => (d, big, None),
            Err(why) => (DType::Opaque(0), false, Some(why)),
        };
        // The data must lie in the file: a truncated array is its problem.
        let bytes = h
            .shape
            .iter()
            .try_fold(dtype.elem_size().unwrap_or(0) as u64, |a, &d| {
                a.checked_mul(d)
            });
        if problem.is_none() {
            match bytes.and_then(|b| b.checked_add(data)) {
                Some(e) if e <= end => {}
                Some(e) => problem = Some(format!("data ends at {e}, past the {end} bytes it has")),
                None => problem = Some("its size overflows".into()),
            }
        }
        NpyTensor {
            meta: TensorMeta {
                extra,
                problem,
                mtime: file.mtime(),
                ..TensorMeta::new(name.as_bytes().to_vec(), dtype, h.shape.clone(), "numpy")
            },
            file: Arc::clone(file),
            data,
            big_endian,
            fortran: h.fortran && h.shape.len() > 1,
            identity: crate::source::identity_string(&**file).map(|f| format!("{f}:{name}")),
            crc: None,
            verdict: OnceLock::new(),
            inflated: None,
        }
    }

    /// The array of a deflated member (`NpyTensor::new` was given its header at 0 and the
    /// stream's length as `end`): read through `inflated`.
    pub(crate) fn inflated_from(mut self, inflated: Arc<Inflated>) -> NpyTensor {
        self.inflated = Some(inflated);
        self
    }

    /// Elements `first..` (row-major) of a Fortran-order array in a deflated member, into
    /// `out`. Deflate has no random access and the elements of any run of rows are spread over
    /// the whole member, so one pass over it in stored order places each element that falls in
    /// the request (a read costs the member's inflation: such members are seen small).
    fn fill_fortran_inflated(
        &self,
        inf: &Inflated,
        first: u64,
        out: &mut [u8],
    ) -> Result<(), ModelError> {
        let width = self.meta.dtype.elem_size().unwrap_or(1);
        let shape = &self.meta.shape;
        let count = (out.len() / width) as u64;
        let end = first + count;
        // Row-major strides (in elements) of each axis; stored order runs axis 0 fastest.
        let mut c_stride = vec![1u64; shape.len()];
        for k in (0..shape.len().saturating_sub(1)).rev() {
            c_stride[k] = c_stride[k + 1] * shape[k + 1];
        }
        let mut index = vec![0u64; shape.len()];
        let mut c_at = 0u64;
        let total = self.meta.num_elements().unwrap_or(0);
        let per = (STEP_BYTES / width).max(1) as u64;
        let mut buf = vec![0u8; per.min(total) as usize * width];
        let mut done = 0u64;
        while done < total {
            let n = per.min(total - done);
            let chunk = &mut buf[..n as usize * width];
            inf.read(self.data + done * width as u64, chunk)?;
            for e in chunk.chunks_exact(width) {
                if (first..end).contains(&c_at) {
                    let o = (c_at - first) as usize * width;
                    out[o..o + width].copy_from_slice(e);
                }
                // The next element in stored (column-major) order.
                for k in 0..shape.len() {
                    index[k] += 1;
                    c_at += c_stride[k];
                    if index[k] < shape[k] {
                        break;
                    }
                    c_at -= c_stride[k] * shape[k];
                    index[k] = 0;
                }
            }
            done += n;
        }
        Ok(())
    }

    /// A member whose `.npy` header cannot be read: listed, with `why` as its problem (the
    /// other members of its `.npz` read as usual).
    pub(crate) fn unreadable(name: &str, why: String, file: &Arc<dyn ReadAt>) -> NpyTensor {
        let h = NpyHeader {
            descr: String::new(),
            fortran: false,
            shape: Vec::new(),
            data_offset: 0,
        };
        let mut t = NpyTensor::new(name, &h, 0, 0, file);
        t.meta.problem = Some(why);
        t
    }

    /// Checks the member's CRC-32 (`member`) on the first read.
    pub(crate) fn verified_by(mut self, member: Member) -> NpyTensor {
        self.crc = Some(member);
        self
    }

    /// The member's checksum verdict, computed on the first call that can read the member: a
    /// source fault is returned and not kept (the next read tries again).
    fn verify(&self) -> Result<(), ModelError> {
        let Some(m) = self.crc else {
            return Ok(());
        };
        let verdict = match self.verdict.get() {
            Some(v) => v,
            None => {
                let mut h = crc32fast::Hasher::new();
                // Piece by piece as the source hands them, each let go once hashed.
                let len = m.end - m.at;
                self.file
                    .for_each_piece(ReadCtx::none(), m.at, len, &mut |p| h.update(p))?;
                let c = h.finalize();
                self.verdict.get_or_init(|| match c == m.crc {
                    true => Ok(()),
                    false => Err(format!(
                        "zip CRC-32 {c:08x} of the member, {:08x} expected",
                        m.crc
                    )),
                })
            }
        };
        verdict.clone().map_err(|e| {
            ModelError::data(
                format!("{} in {}", self.meta.name.escape_ascii(), self.file.name()),
                e,
            )
        })
    }
}

impl Tensor for NpyTensor {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }

    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        self.meta.begin_read(first, out.len(), self.file.name())?;
        self.verify()?;
        let width = self.meta.dtype.elem_size().unwrap_or(1);
        // In bounds: the header check bounded the whole array by the file (or the stream).
        match (&self.inflated, self.fortran) {
            (Some(inf), true) => self.fill_fortran_inflated(inf, first, out)?,
            (Some(inf), false) => inf.read(self.data + first * width as u64, out)?,
            (None, false) => self
                .file
                .read_into(ctx, self.data + first * width as u64, out)?,
            (None, true) => {
                let shape = &self.meta.shape;
                Strided::new(shape, &Strided::column_major(shape), 0, width).fill(
                    ctx,
                    &*self.file,
                    self.data,
                    first,
                    out,
                )?
            }
        }
        if self.big_endian {
            // A complex number is two floats, each swapped on its own.
            let part = match self.meta.dtype {
                DType::C64 | DType::C128 => width / 2,
                _ => width,
            };
            out.chunks_exact_mut(part).for_each(<[u8]>::reverse);
        }
        if self.meta.dtype == DType::Bool {
            out.iter_mut().for_each(|b| *b = u8::from(*b != 0));
        }
        Ok(())
    }

    fn stored_run(&self) -> Option<crate::model::StoredRun> {
        if !self.plain() {
            return None;
        }
        crate::model::StoredRun::elements(&self.file, self.data, &self.meta)
    }

    fn lend(&self, ctx: &ReadCtx, first: u64, len: usize) -> Option<Result<Bytes, ModelError>> {
        if !self.plain() {
            return None;
        }
        debug_check(&self.meta, first, len);
        let width = self.meta.dtype.elem_size().unwrap_or(1) as u64;
        Some((|| {
            self.verify()?;
            let got = self.file.read(ctx, self.data + first * width, len)?;
            Ok(got)
        })())
    }

    fn cache_identity(&self) -> Option<String> {
        self.identity.clone()
    }
}
