//! Helpers shared by the tests that drive the real `vds` binary: scratch
//! directories, running the binary (it must never panic, and a usage or
//! runtime error is one line), and Python from target/pyenv (made by
//! .ci/deps.sh) for NumPy, ds-format and segyio.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use vds::{Axis, Codec, DType, DatasetBuilder, Order, Region, VariableBuilder};

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

pub fn fixture(name: &str) -> String {
    root().join("tool/tests/fixtures").join(name).display().to_string()
}

/// A fresh directory for one test.
pub fn scratch(name: &str) -> PathBuf {
    let d = root().join("target/tmp").join(format!("{}-{name}-{}", env!("CARGO_CRATE_NAME"), std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn vds_in(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_vds")).args(args).current_dir(dir).env_remove("VDS_PROGRESS").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked") && !err.contains("internal error") && !err.contains("backtrace"), "vds {args:?}: {err}");
    assert!(err.lines().count() <= 1 || out.status.code() != Some(1), "vds {args:?}: more than one line of error: {err}");
    out
}

/// Runs vds and expects success; returns standard output.
pub fn ok(dir: &Path, args: &[&str]) -> String {
    let out = vds_in(dir, args);
    assert!(out.status.success(), "vds {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Runs vds and expects exit status `code`; returns standard error.
pub fn fails(dir: &Path, args: &[&str], code: i32) -> String {
    let out = vds_in(dir, args);
    assert_eq!(out.status.code(), Some(code), "vds {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stderr).unwrap()
}

/// Runs a Python script with NumPy and ds-format; it fails the test by raising.
pub fn python(dir: &Path, script: &str) -> String {
    let py = root().join("target/pyenv/bin/python");
    assert!(py.exists(), "{} is missing: run `sh .ci/deps.sh`", py.display());
    let out = Command::new(py).arg("-c").arg(script).current_dir(dir).output().unwrap();
    assert!(out.status.success(), "python failed:\n{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// A small container with known chunk kinds: 3 stored chunks, 1 constant,
/// and 4 never written, in a 4 x 4 x 2 grid of 4^3 chunks.
pub fn known(dir: &Path) -> (PathBuf, Vec<f32>) {
    let path = dir.join("known.vds");
    let mut ds = DatasetBuilder::new()
        .overwrite(true)
        .axis(Axis::new("inline", 16).coordinates(1.0, 16.0))
        .axis(Axis::new("crossline", 16))
        .axis(Axis::new("time", 8).unit("ms").coordinates(0.0, 28.0))
        .variable(VariableBuilder::new("amp", DType::Float32, &["inline", "crossline", "time"]).chunk(&[4, 4, 4]).codec(Codec::NONE))
        .attribute("survey", "known")
        .create(&path)
        .unwrap();
    let mut all = vec![0f32; 16 * 16 * 8];
    for (i, x) in all.iter_mut().enumerate() {
        let (il, xl, t) = (i / 128, (i / 8) % 16, i % 8);
        // Stored: the first 3 chunks along crossline of the first inline/time chunk; constant: the 4th.
        if il < 4 && t < 4 {
            *x = match xl / 4 {
                3 => 7.0,
                c => (il * 100 + xl * 10 + t) as f32 - 150.0 + c as f32,
            };
        }
    }
    let sub: Vec<f32> = (0..4 * 16 * 4).map(|k| all[(k / 64) * 128 + ((k / 4) % 16) * 8 + k % 4]).collect();
    ds.write("amp", &Region::new(&[0, 0, 0], &[4, 16, 4]).unwrap(), Order::C, &sub).unwrap();
    ds.close().unwrap();
    (path, all)
}
