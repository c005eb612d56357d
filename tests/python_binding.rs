//! The Python binding (python/vds.py, ctypes over the C ABI) passes its
//! tests against NumPy references, using the NumPy that .ci/deps.sh
//! installs in target/pyenv.

mod common;
use common::{libs, run};
use std::path::Path;
use std::process::Command;

#[test]
fn python_binding_round_trips_numpy_arrays() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join("target/pyenv/bin/python");
    assert!(python.exists(), "{} is missing: run `sh .ci/deps.sh` first (the README's test command does)", python.display());
    let out = run(Command::new(&python).arg(root.join("python/test_vds.py")).env("VDS_LIBRARY", libs().join("libvds.so")));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("python binding: all") && text.contains("checks passed"), "{text}");
}
