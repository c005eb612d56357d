//! The `vds` binary in bounded memory: a SEG-Y import and a copy that
//! rechunks and recompresses, run with 1 MiB blocks, peak far below the data
//! they move (measured by a fresh Python as its child's peak resident memory).

mod common;

use common::*;
use std::path::Path;
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, Order, Region, VariableBuilder};

/// Runs `vds ARGS` in `dir` with blocks of 1 MiB and returns its peak
/// resident memory in KiB. A fresh Python runs it and reports its child's
/// peak: a child spawned by this test would inherit the test's pages, and
/// one of a Python that had held large arrays, theirs.
fn peak_kib_in_1mib_blocks(dir: &Path, args: &[&str]) -> u64 {
    let list = args.iter().map(|a| format!("{a:?}")).collect::<Vec<_>>().join(", ");
    let report = python(
        dir,
        &format!(
            r#"
import os, resource, subprocess
env = dict(os.environ, VDS_BLOCK_BYTES=str(1 << 20))
env.pop("VDS_PROGRESS", None)
r = subprocess.run(["{vds}", {list}], env=env, capture_output=True)
assert r.returncode == 0, r.stderr
assert r.stderr == b"", "no progress bar when standard error is not a terminal: %r" % r.stderr
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"#,
            vds = env!("CARGO_BIN_EXE_vds")
        ),
    );
    report.trim().parse().unwrap()
}

/// A SEG-Y file of 104 MB (24,576 traces of 1,000 IEEE floats) imported
/// with a block budget of 1 MiB: the import streams, holding one block of
/// whole chunk rows (64 x 64 traces, 16 MiB), never the file.
#[test]
fn segy_import_streams_in_bounded_memory() {
    let dir = scratch("segy-memory");
    let (ni, nx, ns) = (96u64, 256u64, 1000u64);
    // The file is written with NumPy, byte by byte as the standard lays it out;
    // Python then runs the import and reports its peak resident memory.
    python(
        &dir,
        &format!(
            r#"
import numpy as np
ni, nx, ns = {ni}, {nx}, {ns}
binary = np.zeros(400, np.uint8)
for at, value, kind in ((16, 4000, ">i2"), (20, ns, ">u2"), (24, 5, ">i2")):
    binary[at:at + 2] = np.frombuffer(np.array(value, kind).tobytes(), np.uint8)
heads = np.zeros((ni * nx, 240), np.uint8)
heads[:, 188:192] = np.repeat(np.arange(1, ni + 1), nx).astype(">i4").view(np.uint8).reshape(-1, 4)
heads[:, 192:196] = np.tile(np.arange(1, nx + 1), ni).astype(">i4").view(np.uint8).reshape(-1, 4)
heads[:, 114:116] = np.frombuffer(np.array(ns, ">u2").tobytes(), np.uint8)
samples = (np.arange(ni * nx * ns, dtype=np.int64) % 65521).astype(">f4").view(np.uint8).reshape(ni * nx, ns * 4)
with open("big.sgy", "wb") as f:
    f.write(b" " * 3200 + binary.tobytes() + np.concatenate([heads, samples], axis=1).tobytes())
"#
        ),
    );
    let rss_kib = peak_kib_in_1mib_blocks(&dir, &["import", "big.sgy", "big.vds", "--codec", "none"]);
    let file_bytes = std::fs::metadata(dir.join("big.sgy")).unwrap().len();
    let ds = Dataset::open(dir.join("big.vds")).unwrap();
    let got: Vec<f32> = ds.read_vec("amplitude", &Region::full(&[ni, nx, ns]).unwrap(), Order::C).unwrap();
    assert!(got.iter().enumerate().all(|(i, &v)| v == (i as u64 % 65521) as f32), "the imported samples differ");
    eprintln!("SEG-Y import of {file_bytes} bytes in 1 MiB blocks: peak resident memory {rss_kib} KiB");
    assert!(rss_kib * 1024 < file_bytes / 2, "importing {file_bytes} bytes peaked at {rss_kib} KiB");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A hostile SEG-Y file of 6 KiB: three traces whose numbers span a grid of
/// a million cells, each with three trace header extensions (960 bytes of
/// headers per cell, missing ones too). Imported in blocks of 1 MiB the
/// import's memory stays near the budget, not at the 960 MB of headers the
/// whole grid takes.
#[test]
fn a_sparse_segy_grid_imports_within_the_block_budget() {
    let dir = scratch("segy-sparse");
    python(
        &dir,
        r#"
import struct
binary = bytearray(400)
for at, kind, value in ((16, ">h", 4000), (20, ">H", 1), (24, ">h", 5), (302, ">h", 1), (306, ">i", 3)):
    struct.pack_into(kind, binary, at, value)
binary[300] = 2
parts = [b" " * 3200, bytes(binary)]
for il, xl in ((1, 1), (2, 2), (1000, 1000)):
    head = bytearray(960)
    struct.pack_into(">i", head, 188, il)
    struct.pack_into(">i", head, 192, xl)
    struct.pack_into(">H", head, 114, 1)
    head[240 + 156:240 + 158] = struct.pack(">H", 3)
    parts += [bytes(head), struct.pack(">f", il + xl / 1000)]
open("sparse.sgy", "wb").write(b"".join(parts))
"#,
    );
    let rss_kib = peak_kib_in_1mib_blocks(&dir, &["import", "sparse.sgy", "sparse.vds", "-q"]);
    eprintln!("sparse SEG-Y grid of 10^6 cells in 1 MiB blocks: peak resident memory {rss_kib} KiB");
    assert!(rss_kib < 48 * 1024, "a 6 KiB file peaked at {rss_kib} KiB");
    let ds = Dataset::open(dir.join("sparse.vds")).unwrap();
    assert_eq!(ds.variables()[1].shape(), &[1000, 1000, 960]);
    let last: Vec<f32> = ds.read_vec("amplitude", &Region::new(&[999, 999, 0], &[1, 1, 1]).unwrap(), Order::C).unwrap();
    assert_eq!(last, [1001.0]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn copy_rechunks_and_recompresses_in_bounded_memory() {
    let dir = scratch("copy");
    let (n0, n1, n2) = (384u64, 256u64, 256u64);
    let src = dir.join("src.vds");
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("inline", n0))
        .axis(Axis::new("crossline", n1))
        .axis(Axis::new("time", n2))
        .variable(VariableBuilder::new("amp", DType::Float32, &["inline", "crossline", "time"]).chunk(&[32, 32, 32]).codec(Codec::NONE))
        .attribute("survey", "copy")
        .create(&src)
        .unwrap();
    let data: Vec<f32> = (0..n0 * n1 * n2).map(|i| ((i % 1013) as f32 * 0.37).sin()).collect();
    ds.write("amp", &Region::full(&[n0, n1, n2]).unwrap(), Order::C, &data).unwrap();
    ds.close().unwrap();
    // 96 MiB of data moved in 1 MiB blocks: the copy's peak memory stays far
    // below the data.
    let rss_kib = peak_kib_in_1mib_blocks(&dir, &["copy", "src.vds", "dst.vds", "--chunk", "8,64,256", "--codec", "deflate:3"]);
    let ds = Dataset::open(dir.join("dst.vds")).unwrap();
    assert_eq!(ds.variables()[0].chunk_shape(), &[8, 64, 256]);
    assert_eq!(ds.attributes()["survey"], "copy");
    let got: Vec<f32> = ds.read_vec("amp", &Region::full(&[n0, n1, n2]).unwrap(), Order::C).unwrap();
    assert!(got == data, "the copy differs from the source");
    assert!(rss_kib < 40 * 1024, "copying 96 MiB in 1 MiB blocks peaked at {rss_kib} KiB");
    eprintln!("copy of 96 MiB in 1 MiB blocks: peak resident memory {rss_kib} KiB");
    assert!(fails(&dir, &["copy", "src.vds", "dst2.vds", "--chunk", "nope=1,2,3"], 2).contains("variable \"nope\""));
    assert!(fails(&dir, &["copy", "src.vds", "dst2.vds", "--codec", "lz4"], 2)
        .contains("expected none, deflate[:LEVEL], zstd[:LEVEL], bounded:TOL or bounded:P%"));
}
