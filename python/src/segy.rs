//! `import_segy` and `export_segy`: SEG-Y files to containers and back
//! through the vds-segy crate's `container` module, the code `vds import`
//! and `vds export` run, so the two give the same containers and files.
//!
//! Each conversion runs with the GIL released; between blocks it takes the
//! GIL for a moment to look for Ctrl-C, which stops it and raises
//! KeyboardInterrupt. A destination appears only when complete: the work
//! goes to a temporary file beside it, renamed at the end and removed on
//! failure.

use crate::create::{codec, CodecSpec};
use crate::errors::{invalid, to_py, Failure};
use crate::paths::FsPath;
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use serde::Deserialize;
use std::fs::File;
use std::path::{Path, PathBuf};
use vds::{Codec, Durability, LodMethod};
use vds_segy::container::{self, ExportOptions, ImportOptions};
use vds_segy::{KeyBytes, SampleFormat, SegyFile};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ImportSpec {
    inline_byte: usize,
    crossline_byte: usize,
    offset_byte: usize,
    prestack: bool,
    two_d: bool,
    codec: Option<CodecSpec>,
    chunks: Option<Vec<u64>>,
    lods: Option<u8>,
    lod_method: String,
    #[serde(default)]
    partitionings: Vec<Vec<u64>>,
    overwrite: bool,
    sync: bool,
    block_bytes: Option<u64>,
}

/// A conversion's failure as an exception of `vds.errors`: SEG-Y errors by
/// kind (a malformed file is a CorruptFileError with the byte offset).
fn failure(py: Python<'_>, path: &Path, e: container::Error) -> PyErr {
    let named = |m: String| format!("{}: {m}", path.display());
    match e {
        container::Error::Vds(e) => to_py(py, Failure::Library(e)),
        container::Error::Cancelled => PyKeyboardInterrupt::new_err(format!("{} was not written", path.display())),
        container::Error::Write(e) => to_py(py, Failure::Refused("Io", named(format!("writing: {e}")))),
        container::Error::Invalid(m) => invalid(py, named(m)),
        container::Error::Segy(e) => {
            let kind = match e.kind() {
                vds_segy::ErrorKind::Io => "Io",
                vds_segy::ErrorKind::Malformed => "Corrupt",
                vds_segy::ErrorKind::Unsupported => "UnsupportedFeature",
                _ => "InvalidArgument",
            };
            let err = to_py(py, Failure::Refused(kind, named(e.to_string())));
            if kind == "Corrupt" {
                let object = e.trace_number().map_or_else(|| "SEG-Y headers".to_string(), |t| format!("SEG-Y trace {t}"));
                let value = err.value(py);
                let _ = value.setattr("object", object);
                let _ = value.setattr("slot", 0);
                let _ = value.setattr("offset", e.offset());
            }
            err
        }
        other => invalid(py, named(other.to_string())),
    }
}

/// Ctrl-C between blocks: takes the GIL briefly to run Python's signal handlers.
fn keep_going() -> bool {
    Python::attach(|py| py.check_signals().is_ok())
}

/// A sibling of `dst` to write into, renamed over it when complete.
fn temporary(dst: &Path) -> PathBuf {
    let name = dst.file_name().map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
    dst.with_file_name(format!(".{name}.{}.part", std::process::id()))
}

fn open_error(path: &Path, e: &std::io::Error) -> Failure {
    let kind = if e.kind() == std::io::ErrorKind::NotFound { "NotFound" } else { "Io" };
    Failure::Refused(kind, format!("{}: {e}", path.display()))
}

/// import_segy(path, dst, spec_json) -> None
///
/// Imports the SEG-Y file `path` into a new container `dst` (see `vds.from_segy`).
#[pyfunction]
pub(crate) fn import_segy(py: Python<'_>, path: FsPath, dst: FsPath, spec_json: &str) -> PyResult<()> {
    let (path, dst): (&Path, &Path) = (&path, &dst);
    let spec: ImportSpec = serde_json::from_str(spec_json).map_err(|e| invalid(py, format!("from_segy: {e}")))?;
    let codec = match &spec.codec {
        Some(c) => codec(py, container::AMPLITUDE, c)?,
        None => Codec::deflate(1),
    };
    let method = match spec.lod_method.as_str() {
        "average" => LodMethod::Average,
        "nearest" => LodMethod::Nearest,
        m => return Err(invalid(py, format!("lod_method {m:?}: expected \"average\" or \"nearest\""))),
    };
    if let Some(n) = spec.lods.filter(|n| !(1..=vds::MAX_LODS).contains(n)) {
        return Err(invalid(py, format!("lods {n}: expected 1 to {}", vds::MAX_LODS)));
    }
    let keys = KeyBytes {
        inline: spec.inline_byte,
        crossline: spec.crossline_byte,
        offset: spec.prestack.then_some(spec.offset_byte),
        two_d: spec.two_d,
    };
    let opts = ImportOptions {
        keys,
        offset_byte: spec.offset_byte,
        codec,
        chunk: spec.chunks.clone(),
        block_bytes: spec.block_bytes.unwrap_or(container::DEFAULT_BLOCK_BYTES),
    };
    if !spec.overwrite && dst.exists() {
        return Err(to_py(py, Failure::Refused("AlreadyExists", format!("{} exists (pass overwrite=True to replace it)", dst.display()))));
    }
    let temp = temporary(dst);
    let r = py.detach(|| -> Result<Result<(), container::Error>, Failure> {
        let file = File::open(path).map_err(|e| open_error(path, &e))?;
        Ok((|| {
            let file = SegyFile::open(file)?;
            let g = container::scan(&file, &opts, &mut |_| keep_going())?;
            let mut b = container::builder(&file, &g, &opts, &mut |vb| {
                if let Some(n) = spec.lods {
                    let m = if vb.dtype() == vds::DType::Bool { LodMethod::Nearest } else { method };
                    vb.levels_of_detail(n, &[], m);
                }
                for p in &spec.partitionings {
                    vb.partitioning(p);
                }
            })?;
            b.overwrite(true).durability(if spec.sync { Durability::Fsync } else { Durability::None });
            let mut out = b.create(&temp)?;
            container::fill(&file, &g, &mut out, opts.block_bytes, &mut |_| keep_going())?;
            out.close()?;
            std::fs::rename(&temp, dst).map_err(container::Error::Write)
        })())
    });
    match r {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => {
            let _ = std::fs::remove_file(&temp);
            let e = match e {
                container::Error::Cancelled => failure(py, dst, e),
                container::Error::Segy(_) => failure(py, path, e),
                container::Error::Write(e) => to_py(py, Failure::Refused("Io", format!("{}: {e}", dst.display()))),
                e => failure(py, path, e),
            };
            Err(e)
        }
        Err(f) => Err(to_py(py, f)),
    }
}

/// export_segy(src, path, variable, format, overwrite, block_bytes) -> str
///
/// Writes a variable of the container `src` as the SEG-Y file `path`
/// (see `vds.to_segy`); returns the variable's name.
#[pyfunction]
#[pyo3(signature = (src, path, variable=None, format=None, overwrite=false, block_bytes=None))]
pub(crate) fn export_segy(
    py: Python<'_>,
    src: FsPath,
    path: FsPath,
    variable: Option<String>,
    format: Option<i16>,
    overwrite: bool,
    block_bytes: Option<u64>,
) -> PyResult<String> {
    let (src, path): (&Path, &Path) = (&src, &path);
    let format = match format {
        None => None,
        Some(code) => {
            Some(SampleFormat::from_code(code).ok_or_else(|| invalid(py, format!("segy_format {code}: not a SEG-Y sample format code")))?)
        }
    };
    if !overwrite && path.exists() {
        return Err(to_py(py, Failure::Refused("AlreadyExists", format!("{} exists (pass overwrite=True to replace it)", path.display()))));
    }
    let opts = ExportOptions {
        format,
        source_name: src.display().to_string(),
        block_bytes: block_bytes.unwrap_or(container::DEFAULT_BLOCK_BYTES),
    };
    let temp = temporary(path);
    let r = py.detach(|| -> Result<Result<String, container::Error>, Failure> {
        let ds = vds::Dataset::open(src).map_err(Failure::Library)?;
        Ok((|| {
            let v = container::export_variable(&ds, variable.as_deref())?;
            let file = File::create(&temp).map_err(container::Error::Write)?;
            let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
            container::export(&ds, &v, &opts, &mut w, &mut |_| keep_going())?;
            let file = w.into_inner().map_err(|e| container::Error::Write(e.into_error()))?;
            file.sync_all().map_err(container::Error::Write)?;
            std::fs::rename(&temp, path).map_err(container::Error::Write)?;
            Ok(v)
        })())
    });
    match r {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => {
            let _ = std::fs::remove_file(&temp);
            Err(match e {
                container::Error::Write(e) => to_py(py, Failure::Refused("Io", format!("{}: writing: {e}", path.display()))),
                container::Error::Cancelled | container::Error::Segy(_) => failure(py, path, e),
                e => failure(py, src, e),
            })
        }
        Err(f) => Err(to_py(py, f)),
    }
}
