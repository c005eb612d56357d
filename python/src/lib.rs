//! `vds._vds`: the compiled core of the Python package.
//!
//! A thin layer over the public Rust API of libvds, in the manner of h5py's
//! `_objects`/`h5d`: one `Dataset` class with region reads and writes into
//! caller-allocated NumPy arrays, metadata as plain dicts, and errors raised
//! as the classes of `vds.errors`. Indexing, repr, attribute mappings and
//! docs live in the pure-Python package (python/vds/), so that this side
//! holds no Python policy.
//!
//! Every read and write runs with the GIL released (`Python::detach`), so
//! Python threads read one dataset in parallel: a read takes the dataset's
//! lock shared, a write exclusively.

mod arrays;
mod create;
mod dataset;
mod errors;
mod fastcall;
mod files;
mod json;
mod paths;
mod segy;

use pyo3::prelude::*;

/// The compiled core of the `vds` package; use the package, not this module.
#[pymodule]
fn _vds(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<dataset::Dataset>()?;
    m.add_function(wrap_pyfunction!(dataset::open, m)?)?;
    m.add_function(wrap_pyfunction!(dataset::publish, m)?)?;
    m.add_function(wrap_pyfunction!(dataset::create_fragment, m)?)?;
    m.add_function(wrap_pyfunction!(dataset::recover, m)?)?;
    m.add_function(wrap_pyfunction!(create::create, m)?)?;
    m.add_function(wrap_pyfunction!(files::save, m)?)?;
    // `load` the vectorcall way where the stable ABI has it (3.10 on), PyO3's
    // way on 3.9; PyO3's is kept as `_load_tuple` for the tests to compare.
    let load = wrap_pyfunction!(files::load, m)?;
    if m.py().version_info() >= (3, 10) {
        m.add("load", fastcall::function(m, &load, files::load_fastcall)?)?;
    } else {
        m.add("load", &load)?;
    }
    m.add("_load_tuple", load)?;
    m.add_function(wrap_pyfunction!(segy::import_segy, m)?)?;
    m.add_function(wrap_pyfunction!(segy::export_segy, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("FORMAT_VERSION", (vds::FORMAT_MAJOR, vds::FORMAT_MINOR))?;
    m.add("DEFAULT_MEMORY_LIMIT", vds::DEFAULT_MEMORY_LIMIT)?;
    Ok(())
}
