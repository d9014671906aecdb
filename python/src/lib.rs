//! `modelfs._native`: the Rust half of the `modelfs` Python package (`pysrc/modelfs`), a thin
//! layer over `modelfs_core::api`. Python shapes the answers (numpy arrays, dicts); this half reads
//! bytes, with the GIL released, into buffers Python allocated.

use modelfs_core::api::{self, ErrorKind};
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyBufferError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

/// The Python exception for `e`, met reading `name` (`None`: opening) of `source`: one of
/// `modelfs`'s own classes (`pysrc/modelfs/_errors.py`, where they are defined so that they
/// pickle), made there from the error's kind and message.
fn py_err(py: Python<'_>, e: api::Error, name: Option<&str>, source: &str) -> PyErr {
    let kind = match e.kind {
        ErrorKind::Usage => "usage",
        ErrorKind::NotFound => "not_found",
        ErrorKind::Unavailable => "unavailable",
        ErrorKind::Checksum => "checksum",
        ErrorKind::Source => "source",
        ErrorKind::Missing => "missing",
        ErrorKind::Interrupted => "interrupted",
    };
    let made = py
        .import("modelfs._errors")
        .and_then(|m| m.getattr("_raise"))
        .and_then(|f| f.call1((kind, e.message.as_str(), name, source)));
    match made {
        Ok(exc) => PyErr::from_value(exc),
        Err(e) => e,
    }
}

/// Runs `work` on a thread of its own while this one, the GIL released, looks every 100 ms
/// for a signal Python wants raised (Ctrl-C): then `stop` is set, the work given up soon
/// after (it looks at `stop`), and the signal's exception raised once it has.
fn interruptible<T: Send>(
    py: Python<'_>,
    stop: &AtomicBool,
    work: impl FnOnce() -> T + Send,
) -> PyResult<T> {
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel();
        s.spawn(move || {
            let _ = tx.send(work());
        });
        // The receiver is handed to each wait and back (it may be sent, not shared).
        let mut rx = rx;
        loop {
            let (got, back) = py.detach(move || (rx.recv_timeout(Duration::from_millis(100)), rx));
            rx = back;
            match got {
                Ok(done) => return Ok(done),
                Err(RecvTimeoutError::Timeout) => {
                    if let Err(signal) = py.check_signals() {
                        stop.store(true, Ordering::Relaxed);
                        let _ = py.detach(move || rx.recv());
                        return Err(signal);
                    }
                }
                // The work panicked: the scope's end raises it.
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(PyBufferError::new_err("a reading thread failed"))
                }
            }
        }
    })
}

/// A model opened from SOURCE with `-o` options.
#[pyclass(frozen, module = "modelfs._native")]
struct Model {
    inner: api::Opened,
    source: String,
    /// Scans made (`scan_info`): a piece read after another needs not find its bounds again.
    scans: std::sync::Mutex<std::collections::HashMap<(String, usize), std::sync::Arc<api::Scan>>>,
}

impl Model {
    fn err(&self, py: Python<'_>, e: api::Error, name: &str) -> PyErr {
        py_err(py, e, Some(name), &self.source)
    }

    fn scan(&self, name: &str, part: usize) -> Result<std::sync::Arc<api::Scan>, api::Error> {
        let key = (name.trim_matches('/').to_string(), part);
        let lock = || self.scans.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = lock().get(&key) {
            return Ok(s.clone());
        }
        // Made outside the lock (a column-keyed table's bounds read its rows); two threads
        // racing make it twice, and both are the same.
        let made = std::sync::Arc::new(self.inner.scan(&key.0, part)?);
        Ok(lock().entry(key).or_insert(made).clone())
    }

    /// Fills writable, contiguous `out` with the bytes of the file `open` gives, at `offset`
    /// (`name` for errors).
    fn fill(
        &self,
        py: Python<'_>,
        name: &str,
        offset: u64,
        out: &Bound<'_, PyAny>,
        open: impl Fn() -> Result<api::Npy, api::Error> + Send + Sync,
    ) -> PyResult<()> {
        let buffer = PyBuffer::<u8>::get(out)?;
        if buffer.readonly() || !buffer.is_c_contiguous() {
            return Err(PyValueError::new_err(
                "a writable, contiguous buffer is needed",
            ));
        }
        let (at, len) = (buffer.buf_ptr() as usize, buffer.len_bytes());
        if len == 0 {
            // An empty exporter may report no pointer at all: nothing to fill.
            return Ok(());
        }
        let stop = AtomicBool::new(false);
        let read = || {
            // SAFETY: `buffer` holds the exporter's buffer (a numpy array's memory) for as
            // long as it lives, which is past this call (the reading thread is joined before
            // it returns): the memory stays where it is and `len` bytes long; it is writable
            // and contiguous (checked above). A caller that writes the same array from another
            // thread meanwhile races with this read, as with any reader filling a buffer
            // (`readinto`).
            let out = unsafe { std::slice::from_raw_parts_mut(at as *mut u8, len) };
            open()?.read_into_until(offset, out, &stop)
        };
        interruptible(py, &stop, read)?.map_err(|e| self.err(py, e, name))?;
        drop(buffer);
        Ok(())
    }
}

#[pymethods]
impl Model {
    #[new]
    fn new(py: Python<'_>, source: String, options: Vec<String>) -> PyResult<Model> {
        let inner = py
            .detach(|| api::Opened::open(&source, &options))
            .map_err(|e| py_err(py, e, None, &source))?;
        Ok(Model {
            inner,
            source,
            scans: Default::default(),
        })
    }

    /// Every tensor's mount path with its dtype's name, sorted.
    fn keys(&self, py: Python<'_>) -> PyResult<Vec<(String, String)>> {
        py.detach(|| self.inner.typed_keys().map(|k| k.to_vec()))
            .map_err(|e| py_err(py, e, None, &self.source))
    }

    /// The bytes of `NAME.json`.
    fn json<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = py
            .detach(|| self.inner.json(name))
            .map_err(|e| self.err(py, e, name))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// The header of `NAME.npy` and the file's size.
    fn npy_header<'py>(&self, py: Python<'py>, name: &str) -> PyResult<(Bound<'py, PyBytes>, u64)> {
        let (header, size) = py
            .detach(|| {
                let npy = self.inner.npy(name)?;
                Ok::<_, api::Error>((npy.header()?, npy.size()?))
            })
            .map_err(|e| self.err(py, e, name))?;
        Ok((PyBytes::new(py, &header), size))
    }

    /// Fills writable, contiguous `out` with the bytes of `NAME.npy` at `offset`.
    fn read_npy_into(
        &self,
        py: Python<'_>,
        name: &str,
        offset: u64,
        out: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.fill(py, name, offset, out, || self.inner.npy(name))
    }

    /// The size of the mount's file at `path` (any file the mount answers by name).
    fn file_size(&self, py: Python<'_>, path: &str) -> PyResult<u64> {
        py.detach(|| self.inner.file(path)?.size())
            .map_err(|e| self.err(py, e, path))
    }

    /// Fills `out` with the bytes of the mount's file at `path`, from `offset`.
    fn read_file_into(
        &self,
        py: Python<'_>,
        path: &str,
        offset: u64,
        out: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.fill(py, path, offset, out, || self.inner.file(path))
    }

    /// The size of tensor `name`'s stored bytes (`NAME.bin`).
    fn raw_size(&self, py: Python<'_>, name: &str) -> PyResult<u64> {
        py.detach(|| self.inner.raw(name)?.size())
            .map_err(|e| self.err(py, e, name))
    }

    /// Fills `out` with tensor `name`'s stored bytes from `offset`.
    fn read_raw_into(
        &self,
        py: Python<'_>,
        name: &str,
        offset: u64,
        out: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.fill(py, name, offset, out, || self.inner.raw(name))
    }

    /// The entries of the mount's directory `path` in listing order: (name, is a directory,
    /// size as `ls -l` shows it or None until known without rendering).
    fn list_dir(&self, py: Python<'_>, path: &str) -> PyResult<Vec<(String, bool, Option<u64>)>> {
        let entries = py
            .detach(|| self.inner.list(path))
            .map_err(|e| self.err(py, e, path))?;
        Ok(entries
            .into_iter()
            .map(|e| (e.name, e.dir, e.size))
            .collect())
    }

    /// What `stat` of the mount's `path` says (symlinks followed): (is a directory, size as
    /// in `list_dir`).
    fn stat(&self, py: Python<'_>, path: &str) -> PyResult<(bool, Option<u64>)> {
        let s = py
            .detach(|| self.inner.stat(path))
            .map_err(|e| self.err(py, e, path))?;
        Ok((s.dir, s.size))
    }

    /// How many parts keyed tensor or hash table `name`'s rows are read in, each alone (a
    /// Monolith table's shards; 1 for a table read whole). Metadata only.
    fn scan_parts(&self, py: Python<'_>, name: &str) -> PyResult<usize> {
        py.detach(|| self.inner.scan_parts(name))
            .map_err(|e| self.err(py, e, name))
    }

    /// The pieces of part `part` of keyed tensor or hash table `name`'s rows in stored order:
    /// (pieces, rows or None, elements per row, numpy descr, bytes of a piece about, found by
    /// stored ids).
    fn scan_info(
        &self,
        py: Python<'_>,
        name: &str,
        part: usize,
    ) -> PyResult<(usize, Option<u64>, u64, String, u64, bool)> {
        let s = py
            .detach(|| self.scan(name, part))
            .map_err(|e| self.err(py, e, name))?;
        Ok((
            s.pieces(),
            s.rows(),
            s.width(),
            s.descr().to_string(),
            s.piece_bytes(),
            s.by_id(),
        ))
    }

    /// Piece `k` of `scan_info(name, part)`: (ids as native int64 bytes, values' bytes),
    /// sentinels left out.
    fn scan_read<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        part: usize,
        k: usize,
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let got = py
            .detach(|| self.scan(name, part)?.read(k))
            .map_err(|e| self.err(py, e, name))?;
        let ids: &[u8] = bytemuck::cast_slice(&got.ids);
        Ok((PyBytes::new(py, ids), PyBytes::new(py, &got.values)))
    }

    /// Whether the mount answers `path` by name (metadata only).
    fn exists(&self, py: Python<'_>, path: &str) -> bool {
        py.detach(|| self.inner.exists(path))
    }

    /// The hash tables that are no listed tensor (a TF table's buckets are).
    fn tables(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        py.detach(|| self.inner.tables())
            .map_err(|e| py_err(py, e, None, &self.source))
    }

    /// The elements of string tensor `name`, each its bytes.
    fn strings<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let got = py
            .detach(|| self.inner.strings(name))
            .map_err(|e| self.err(py, e, name))?;
        Ok(got.iter().map(|b| PyBytes::new(py, b)).collect())
    }
    /// The element bytes of `NAME.npy` lent from the mapped file (checked first), or `None`
    /// where they are not stored as the array holds them.
    fn lend(&self, py: Python<'_>, name: &str) -> PyResult<Option<Lent>> {
        let got = py
            .detach(|| self.inner.lend(name))
            .map_err(|e| self.err(py, e, name))?;
        Ok(got.map(|bytes| Lent { bytes }))
    }

    /// Rows of keyed tensor `name` by id: (found ids, numpy descr, row width, values).
    fn rows<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        ids: Vec<i64>,
    ) -> PyResult<(Vec<i64>, String, u64, Bound<'py, PyBytes>)> {
        let rows = py
            .detach(|| self.inner.rows(name, &ids))
            .map_err(|e| self.err(py, e, name))?;
        Ok((
            rows.found,
            rows.descr,
            rows.width,
            PyBytes::new(py, &rows.values),
        ))
    }
}

/// Read-only bytes of a mapped file, lent to Python through the buffer protocol: a numpy
/// array over them (`np.frombuffer`) keeps this object, hence the mapping, alive.
#[pyclass(frozen, module = "modelfs._native")]
struct Lent {
    bytes: bytes::Bytes,
}

#[pymethods]
impl Lent {
    fn __len__(&self) -> usize {
        self.bytes.len()
    }

    /// # Safety
    /// Called by Python with a `Py_buffer` to fill (the buffer protocol's contract).
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut pyo3::ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("no view to fill"));
        }
        if flags & pyo3::ffi::PyBUF_WRITABLE == pyo3::ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err("the bytes of a model are read-only"));
        }
        let len = isize::try_from(slf.get().bytes.len())
            .map_err(|_| PyBufferError::new_err("too large"))?;
        let at = slf.get().bytes.as_ptr();
        // SAFETY: `view` is the caller's, valid for writes (checked non-null). The bytes stay
        // where they are while `obj` (this object, whose reference the view takes) lives:
        // `Bytes` never moves its data, and this object is frozen.
        unsafe {
            (*view).obj = slf.into_any().into_ptr();
            (*view).buf = at as *mut c_void;
            (*view).len = len;
            (*view).readonly = 1;
            (*view).itemsize = 1;
            (*view).format = if flags & pyo3::ffi::PyBUF_FORMAT == pyo3::ffi::PyBUF_FORMAT {
                c"B".as_ptr() as *mut _
            } else {
                std::ptr::null_mut()
            };
            (*view).ndim = 1;
            (*view).shape = if flags & pyo3::ffi::PyBUF_ND == pyo3::ffi::PyBUF_ND {
                &mut (*view).len
            } else {
                std::ptr::null_mut()
            };
            (*view).strides = if flags & pyo3::ffi::PyBUF_STRIDES == pyo3::ffi::PyBUF_STRIDES {
                &mut (*view).itemsize
            } else {
                std::ptr::null_mut()
            };
            (*view).suboffsets = std::ptr::null_mut();
            (*view).internal = std::ptr::null_mut();
        }
        Ok(())
    }

    /// # Safety
    /// Called by Python when a view ends; nothing to free (the view's `obj` reference is
    /// Python's to drop).
    unsafe fn __releasebuffer__(&self, _view: *mut pyo3::ffi::Py_buffer) {}
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Model>()?;
    m.add_class::<Lent>()?;
    // The crate version and the commit the extension is built from (`0.1.0+g1a2b3c4d5e6f`).
    m.add("__version__", modelfs_core::PEP440_VERSION)?;
    Ok(())
}
