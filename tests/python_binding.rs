//! The Python package (python/: a PyO3 extension built by maturin, and the
//! `vds` package around it) passes its pytest suite against NumPy, xarray
//! and Dask references. The package is first reinstalled into target/pyenv
//! (which .ci/deps.sh makes) from the current sources, so the tests never
//! run a stale build.

mod common;
use common::run;
use std::path::Path;
use std::process::Command;

#[test]
fn python_package_passes_its_tests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bin = root.join("target/pyenv/bin");
    let python = bin.join("python");
    assert!(python.exists(), "{} is missing: run `sh .ci/deps.sh` first (the README's test command does)", python.display());
    // maturin's build hook runs `maturin` from PATH: the venv's.
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    run(Command::new(&python)
        .args(["-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "--force-reinstall"])
        .arg(root.join("python"))
        .env("PATH", &path)
        .current_dir(root));
    let out = run(Command::new(&python)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "python/tests"])
        .env("PATH", &path)
        .current_dir(root));
    let text = String::from_utf8_lossy(&out.stdout);
    let summary = text.lines().last().unwrap_or_default();
    // Every test runs: what the tests need is installed by .ci/deps.sh, so a skip is a failure.
    assert!(
        summary.contains(" passed") && !summary.contains("failed") && !summary.contains("error") && !summary.contains("skipped"),
        "{text}"
    );
}
