//! `modelfs._native`: the Rust half of the `modelfs` Python package (`pysrc/modelfs`), a thin
//! layer over `modelfs::api`. Python shapes the answers (numpy arrays, dicts); this half reads
//! bytes, with the GIL released, into buffers Python allocated.

use modelfs::api::{self, ErrorKind};
use pyo3::buffer::PyBuffer;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

create_exception!(_native, ModelfsError, PyException, "Any error of modelfs.");
create_exception!(
    _native,
    SourceError,
    ModelfsError,
    "The source could not be read."
);
create_exception!(
    _native,
    ChecksumError,
    SourceError,
    "Stored bytes whose checksum does not match."
);
create_exception!(
    _native,
    UnavailableError,
    ModelfsError,
    "The tensor has no form asked for (strings as numbers, a dtype numpy lacks)."
);
create_exception!(
    _native,
    UsageError,
    ModelfsError,
    "An option or argument modelfs refuses."
);

fn py_err(e: api::Error) -> PyErr {
    match e.kind {
        ErrorKind::Usage => UsageError::new_err(e.message),
        ErrorKind::NotFound => PyKeyError::new_err(e.message),
        ErrorKind::Unavailable => UnavailableError::new_err(e.message),
        ErrorKind::Checksum => ChecksumError::new_err(e.message),
        ErrorKind::Source => SourceError::new_err(e.message),
    }
}

/// A model opened from SOURCE with `-o` options.
#[pyclass(frozen, module = "modelfs._native")]
struct Model {
    inner: api::Opened,
}

#[pymethods]
impl Model {
    #[new]
    fn new(py: Python<'_>, source: String, options: Vec<String>) -> PyResult<Model> {
        let inner = py
            .detach(|| api::Opened::open(&source, &options))
            .map_err(py_err)?;
        Ok(Model { inner })
    }

    fn keys(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        py.detach(|| self.inner.keys()).map_err(py_err)
    }

    /// The bytes of `NAME.json`.
    fn json<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = py.detach(|| self.inner.json(name)).map_err(py_err)?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// The header of `NAME.npy` and the file's size.
    fn npy_header<'py>(&self, py: Python<'py>, name: &str) -> PyResult<(Bound<'py, PyBytes>, u64)> {
        let (header, size) = py
            .detach(|| {
                let npy = self.inner.npy(name)?;
                Ok::<_, api::Error>((npy.header()?, npy.size()?))
            })
            .map_err(py_err)?;
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
        let buffer = PyBuffer::<u8>::get(out)?;
        if buffer.readonly() || !buffer.is_c_contiguous() {
            return Err(PyValueError::new_err(
                "a writable, contiguous buffer is needed",
            ));
        }
        let (at, len) = (buffer.buf_ptr() as usize, buffer.len_bytes());
        py.detach(|| {
            // SAFETY: `buffer` holds the exporter's buffer (a numpy array's memory) for as
            // long as it lives, which is past this call: the memory stays where it is and
            // `len` bytes long; it is writable and contiguous (checked above). A caller that
            // writes the same array from another thread meanwhile races with this read, as
            // with any reader filling a buffer (`readinto`).
            let out = unsafe { std::slice::from_raw_parts_mut(at as *mut u8, len) };
            self.inner.npy(name)?.read_into(offset, out)
        })
        .map_err(py_err)?;
        drop(buffer);
        Ok(())
    }

    /// Rows of keyed tensor `name` by id: (found ids, numpy descr, row width, values).
    fn rows<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        ids: Vec<i64>,
    ) -> PyResult<(Vec<i64>, String, u64, Bound<'py, PyBytes>)> {
        let rows = py.detach(|| self.inner.rows(name, &ids)).map_err(py_err)?;
        Ok((
            rows.found,
            rows.descr,
            rows.width,
            PyBytes::new(py, &rows.values),
        ))
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Model>()?;
    m.add("ModelfsError", py.get_type::<ModelfsError>())?;
    m.add("SourceError", py.get_type::<SourceError>())?;
    m.add("ChecksumError", py.get_type::<ChecksumError>())?;
    m.add("UnavailableError", py.get_type::<UnavailableError>())?;
    m.add("UsageError", py.get_type::<UsageError>())?;
    Ok(())
}
