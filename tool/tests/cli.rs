//! Drives the real `vds` binary: every subcommand, bad arguments, missing
//! and damaged files. Interop is checked against the real tools: the .npy
//! fixtures were written by NumPy and the .ds fixtures by ds-format (see
//! fixtures/make_fixtures.py), and what the tool writes is read back by
//! NumPy and ds-format from target/pyenv (made by .ci/deps.sh).

mod common;

use common::*;
use std::path::Path;
use std::process::{Command, Stdio};
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, Order, Region, VariableBuilder};

const NPY_FIXTURES: [&str; 13] = [
    "bool",
    "float32_3d",
    "float64_big_endian",
    "float64_fortran",
    "int16",
    "int32_big_endian",
    "int64",
    "int8",
    "scalar",
    "uint16_fortran",
    "uint32",
    "uint64",
    "uint8",
];

#[test]
fn npy_files_written_by_numpy_round_trip_exactly() {
    let dir = scratch("npy");
    for name in NPY_FIXTURES {
        let order = if name.contains("fortran") { "F" } else { "C" };
        let header = std::fs::read(fixture(&format!("{name}.npy"))).unwrap();
        let dims = String::from_utf8_lossy(&header[..128])
            .split("'shape': (")
            .nth(1)
            .unwrap()
            .split(')')
            .next()
            .unwrap()
            .split(',')
            .filter(|d| !d.trim().is_empty())
            .count()
            .max(1);
        let chunk = ["4", "3,2", "2,2,2", "2,1,2,1"][dims - 1];
        ok(&dir, &["import", &fixture(&format!("{name}.npy")), &format!("{name}.vds"), "--chunk", chunk]);
        ok(&dir, &["export", &format!("{name}.vds"), &format!("{name}.npy"), "--order", order]);
        // The whole array as CSV, for a value-by-value comparison with NumPy.
        let csv = ok(&dir, &["dump", &format!("{name}.vds"), name, "--csv"]);
        std::fs::write(dir.join(format!("{name}.csv")), csv).unwrap();
    }
    let report = python(
        &dir,
        &format!(
            r#"
import numpy as np
for name in {NPY_FIXTURES:?}:
    ref = np.load("{}/" + name + ".npy")
    got = np.load(name + ".npy")
    assert got.dtype == ref.dtype.newbyteorder("<") or got.dtype == ref.dtype, (name, got.dtype, ref.dtype)
    assert got.shape == ref.shape, (name, got.shape, ref.shape)
    assert np.isfortran(got) == np.isfortran(ref), name
    assert np.array_equal(got, ref), name
    rows = open(name + ".csv").read().splitlines()[1:]
    flat = ref.reshape(-1) if ref.ndim else ref.reshape(1)
    assert len(rows) == flat.size, (name, len(rows))
    for row, want in zip(rows, flat):
        text = row.split(",")[-1]
        if ref.dtype.kind == "b":
            assert text == str(bool(want)).lower(), (name, row)
        elif ref.dtype.kind == "f":
            assert ref.dtype.type(float(text)) == want, (name, row, want)
        else:
            assert int(text) == int(want), (name, row, want)
print("checked", len({NPY_FIXTURES:?}))
"#,
            root().join("tool/tests/fixtures").display()
        ),
    );
    assert_eq!(report.trim(), "checked 13");
    // The chunk options were applied by number of dimensions.
    let ds = Dataset::open(dir.join("float32_3d.vds")).unwrap();
    assert_eq!(ds.variables()[0].chunk_shape(), &[2, 2, 2]);
    assert_eq!(ds.axes()[0].name(), "dim0");
}

#[test]
fn ds_files_written_by_ds_format_round_trip_exactly() {
    let dir = scratch("ds");
    for name in ["mixed", "simple"] {
        ok(&dir, &["import", &fixture(&format!("{name}.ds")), &format!("{name}.vds")]);
        ok(&dir, &["export", &format!("{name}.vds"), &format!("{name}.ds")]);
    }
    // Variables one by one through .npy too, compared with ds-format's reading.
    for var in ["time", "level", "temperature", "counts", "flag", "pressure_be", "height"] {
        ok(&dir, &["export", "mixed.vds", &format!("{var}.npy"), var]);
    }
    let report = python(
        &dir,
        &format!(
            r#"
import numpy as np, ds_format as ds
n = 0
for name in ["mixed", "simple"]:
    a = ds.read("{fixtures}/" + name + ".ds")
    b = ds.read(name + ".ds")
    assert sorted(ds.vars(a)) == sorted(ds.vars(b)), (ds.vars(a), ds.vars(b))
    assert ds.attrs(a) == ds.attrs(b), (ds.attrs(a), ds.attrs(b))
    for v in ds.vars(a):
        x, y = a[v], b[v]
        assert ds.dims(a, v) == ds.dims(b, v), v
        assert ds.attrs(a, v) == ds.attrs(b, v), (v, ds.attrs(a, v), ds.attrs(b, v))
        assert np.array_equal(np.ma.getmaskarray(x), np.ma.getmaskarray(y)), v
        assert np.array_equal(np.ma.getdata(x), np.ma.getdata(y)), v
        assert np.asarray(x).dtype.kind == np.asarray(y).dtype.kind, v
        n += 1
a = ds.read("{fixtures}/mixed.ds")
for v in ["time", "level", "temperature", "counts", "flag", "pressure_be", "height"]:
    got = np.load(v + ".npy")
    want = np.ma.getdata(a[v])
    assert got.shape == np.shape(want), (v, got.shape)
    assert np.array_equal(got, want), (v, got, want)
    n += 1
print("checked", n)
"#,
            fixtures = root().join("tool/tests/fixtures").display()
        ),
    );
    assert_eq!(report.trim(), "checked 17");
    // How the container holds what ds calls masks and strings.
    let ds = Dataset::open(dir.join("mixed.vds")).unwrap();
    let mask: Vec<bool> = ds.read_vec("counts:missing", &Region::full(&[4]).unwrap(), Order::C).unwrap();
    assert_eq!(mask, [false, true, false, true]);
    let station = ds.variable("station").unwrap();
    assert_eq!(station.dtype(), DType::UInt8);
    let bytes: Vec<u8> = ds.read_vec("station", &Region::full(station.shape()).unwrap(), Order::C).unwrap();
    let width = station.shape()[1] as usize;
    assert_eq!(&bytes[width..width + "Zürich".len()], "Zürich".as_bytes());
}

#[test]
fn info_reports_chunk_kinds_codecs_and_space() {
    let dir = scratch("info");
    let (path, _) = known(&dir);
    let p = path.to_str().unwrap();
    let text = ok(&dir, &["info", p]);
    assert!(text.contains("amp float32 [inline=16, crossline=16, time=8]"), "{text}");
    assert!(text.contains("chunks 4x4x4 (grid 4x4x2), none, fill 0"), "{text}");
    assert!(text.contains("32 chunks: stored 3, constant 1, fill 0, unwritten 28"), "{text}");
    assert!(text.contains("time            8 samples  0 .. 28 ms"), "{text}");
    assert!(text.contains("attributes: {\"survey\":\"known\"}"), "{text}");
    let json: vds::serde_json::Value = vds::serde_json::from_str(&ok(&dir, &["info", p, "--json"])).unwrap();
    let v = &json["variables"][0];
    assert_eq!(v["chunks"]["stored"], 3);
    assert_eq!(v["chunks"]["constant"], 1);
    assert_eq!(v["chunks"]["unwritten"], 28);
    assert_eq!(v["bytes"]["raw"], 3 * 64 * 4);
    assert_eq!(v["bytes"]["stored"], 3 * 64 * 4);
    assert_eq!(json["file_bytes"], std::fs::metadata(&path).unwrap().len());
    assert_eq!(json["reclaimable_bytes"], 0);
    // Rewriting a chunk leaves its old copy behind, which info reports as reclaimable.
    let mut ds = Dataset::open_rw(&path).unwrap();
    ds.write("amp", &Region::new(&[0, 0, 0], &[4, 4, 4]).unwrap(), Order::C, &[1.5f32; 64]).unwrap();
    ds.close().unwrap();
    let json: vds::serde_json::Value = vds::serde_json::from_str(&ok(&dir, &["info", p, "--json"])).unwrap();
    assert_eq!(json["variables"][0]["chunks"]["constant"], 2);
    // 4x4x4 was asked for: not the default shape (SPEC.md 3.1), 256 bytes a chunk.
    assert_eq!((json["variables"][0]["default_chunk"].as_bool(), json["variables"][0]["chunk_bytes"].as_u64()), (Some(false), Some(256)));
    // A container this small has the compact layout: 256-byte pages, of
    // which a leaf and the root branch above it were replaced.
    assert_eq!((json["layout"].as_str(), json["index_page_bytes"].as_u64()), (Some("compact"), Some(256)));
    assert_eq!(json["reclaimable_bytes"], 64 * 4 + 2 * 256);
    // Recompressed with zstd: info names the codec, and the values are the same.
    ok(&dir, &["copy", p, "zstd.vds", "--codec", "zstd:5"]);
    let text = ok(&dir, &["info", "zstd.vds"]);
    assert!(text.contains("chunks 4x4x4 (grid 4x4x2), zstd level 5 + shuffle, fill 0"), "{text}");
    let region = Region::full(&[16, 16, 8]).unwrap();
    let want: Vec<f32> = Dataset::open(&path).unwrap().read_vec("amp", &region, Order::C).unwrap();
    let got: Vec<f32> = Dataset::open(dir.join("zstd.vds")).unwrap().read_vec("amp", &region, Order::C).unwrap();
    assert!(got == want, "the zstd copy differs from the source");
    assert!(fails(&dir, &["copy", p, "z.vds", "--codec", "zstd:23"], 2).contains("level \"23\" is not 1 to 22"));
    // Copied with the bounded codec: info shows the bound and the ratio,
    // and every value is within the bound of the source's.
    ok(&dir, &["copy", p, "bounded.vds", "--codec", "bounded:0.5"]);
    let text = ok(&dir, &["info", "bounded.vds"]);
    assert!(
        text.contains("chunks 4x4x4 (grid 4x4x2), bounded, error <= 0.5 (graded anchored interpolation prediction, zstd level 3), fill 0"),
        "{text}"
    );
    assert!(text.contains(", ratio "), "{text}");
    let got: Vec<f32> = Dataset::open(dir.join("bounded.vds")).unwrap().read_vec("amp", &region, Order::C).unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert!((f64::from(*g) - f64::from(*w)).abs() <= 0.5, "{g} for {w}");
    }
    for bad in ["bounded:0", "bounded:-1", "bounded:x", "bounded:inf", "bounded"] {
        assert!(fails(&dir, &["copy", p, "b.vds", "--codec", bad], 2).contains("--codec"), "{bad}");
    }
}

#[test]
fn dump_prints_the_values_of_a_region() {
    let dir = scratch("dump");
    let (path, all) = known(&dir);
    let p = path.to_str().unwrap();
    let text = ok(&dir, &["dump", p, "amp", "--region", "1:3,5,2:6"]);
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("amp[1:3, 5, 2:6] float32, axes inline, crossline, time"));
    for il in 1..3 {
        assert_eq!(lines.next(), Some(format!("// amp[{il}, :, :]").as_str()));
        let want: Vec<String> = (2..6).map(|t| all[il * 128 + 5 * 8 + t].to_string()).collect();
        assert_eq!(lines.next(), Some(want.join(", ").as_str()));
        if il == 1 {
            assert_eq!(lines.next(), Some(""));
        }
    }
    assert_eq!(lines.next(), None);
    let csv = ok(&dir, &["dump", p, "amp", "--region", "3,14:16", "--csv"]);
    let rows: Vec<&str> = csv.lines().collect();
    assert_eq!(rows[0], "inline,crossline,time,amp");
    assert_eq!(rows.len(), 1 + 2 * 8);
    assert_eq!(rows[1 + 8 + 3], format!("3,15,3,{}", all[3 * 128 + 15 * 8 + 3]));
    // Large requests need --all; bad regions and names are clear errors.
    let big = dir.join("big.vds");
    DatasetBuilder::new()
        .axis(Axis::new("x", 20_000))
        .variable(&VariableBuilder::new("v", DType::Int8, &["x"]))
        .create(&big)
        .unwrap()
        .close()
        .unwrap();
    let err = fails(&dir, &["dump", big.to_str().unwrap(), "v"], 1);
    assert!(err.contains("20000 values is more than 10000"), "{err}");
    assert_eq!(ok(&dir, &["dump", big.to_str().unwrap(), "v", "--all"]).lines().count(), 2);
    assert!(fails(&dir, &["dump", p, "amp", "--region", "0:99"], 2).contains("not a non-empty range inside axis 0's 0:16"));
    assert!(fails(&dir, &["dump", p, "amp", "--region", "1,2,3,4"], 2).contains("4 items for 3 axes"));
    assert!(fails(&dir, &["dump", p, "nope"], 1).contains("no variable named \"nope\""));
    assert!(fails(&dir, &["dump", p, "amp", "--lod", "1"], 1).contains("level 1 does not exist"));
}

#[test]
fn verify_finds_damage_and_says_where() {
    let dir = scratch("verify");
    let (path, _) = known(&dir);
    let p = path.to_str().unwrap();
    // A progress bar only when asked for (standard error is not a terminal here).
    assert!(vds_in(&dir, &["verify", p]).stderr.is_empty());
    let shown = Command::new(env!("CARGO_BIN_EXE_vds")).args(["verify", p]).env("VDS_PROGRESS", "always").output().unwrap();
    assert!(String::from_utf8_lossy(&shown.stderr).contains("\rverifying"), "{shown:?}");
    let text = ok(&dir, &["verify", p]);
    // Four entries need a branch and two leaves of 256 bytes (the compact layout, SPEC.md 1.1).
    assert!(text.contains("intact (commit 2, 4 chunks and 3 index pages checked, layers consistent"), "{text}");
    // Flip a byte inside the first stored chunk (the body starts after the head and both slots).
    let mut bytes = std::fs::read(&path).unwrap();
    let head = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
    let head = head + bytes[head..].iter().position(|&b| b == b'\n').unwrap() + 1;
    // Slots of 512 bytes after an aligned head, 128 after a compact one (SPEC.md 1.1).
    let body = head + if head % 4096 == 0 { 1024 } else { 256 };
    bytes[body + 10] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let out = vds_in(&dir, &["verify", p]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("damaged: 1 problems in commit 2"), "{text}");
    assert!(text.contains(&format!("offset {:#x}", body)), "{text}");
    // Files that are not containers, or not there.
    assert!(fails(&dir, &["verify", "missing.vds"], 1).contains("missing.vds"));
    std::fs::write(dir.join("text.vds"), "hello\n").unwrap();
    assert!(fails(&dir, &["verify", "text.vds"], 1).contains("not a libvds container"));
    std::fs::write(dir.join("short.vds"), &bytes[..100]).unwrap();
    assert!(fails(&dir, &["info", "short.vds"], 1).contains("short.vds"));
}

#[test]
fn slices_become_pictures_that_decode_to_the_values() {
    let dir = scratch("slice");
    let (path, all) = known(&dir);
    let p = path.to_str().unwrap();
    let decode = |name: &str| {
        let file = std::fs::File::open(dir.join(name)).unwrap();
        let mut reader = png::Decoder::new(std::io::BufReader::new(file)).read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.color_type, info.bit_depth), (png::ColorType::Rgb, png::BitDepth::Eight));
        (info.width, info.height, buf)
    };
    // An inline slice: crossline across, time down.
    let text = ok(&dir, &["slice", p, "amp", "--axis", "inline", "--index", "2", "-o", "il.png", "--clip", "100"]);
    assert!(text.contains("16 x 8 pixels, crossline across, time down, at inline index 2 (inline 3)"), "{text}");
    let (w, h, rgb) = decode("il.png");
    assert_eq!((w, h), (16, 8));
    let max = (0..16 * 8).map(|k| all[2 * 128 + k].abs()).fold(0f32, f32::max);
    for (x, y) in [(0usize, 0usize), (5, 3), (13, 1), (9, 6)] {
        let v = all[2 * 128 + x * 8 + y];
        let px = &rgb[(y * 16 + x) * 3..][..3];
        match v {
            0.0 => assert_eq!(px, [255, 255, 255], "zero is white at {x},{y}"),
            v if v > 0.0 => assert!(px[0] > px[2], "positive is red at {x},{y}: {px:?}"),
            _ => assert!(px[2] > px[0], "negative is blue at {x},{y}: {px:?}"),
        }
        if v.abs() == max {
            assert!(px == [128, 0, 0] || px == [0, 0, 77], "the largest |value| is at the end of the map: {px:?}");
        }
    }
    // A grey time slice by axis number: smallest black, largest white.
    ok(&dir, &["slice", p, "amp", "--axis", "2", "--index", "1", "-o", "t.png", "--colormap", "grey", "--clip", "100"]);
    let (w, h, rgb) = decode("t.png");
    assert_eq!((w, h), (16, 16));
    let plane: Vec<f32> = (0..256).map(|k| all[(k % 16) * 128 + (k / 16) * 8 + 1]).collect();
    let (lo, hi) = plane.iter().fold((f32::MAX, f32::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    for (k, &v) in plane.iter().enumerate() {
        let px = &rgb[k * 3..][..3];
        assert_eq!(px[0], ((v - lo) / (hi - lo) * 255.0).round() as u8, "pixel {k}");
    }
    assert!(fails(&dir, &["slice", p, "amp", "--axis", "inline", "--index", "16", "-o", "x.png"], 1).contains("outside axis \"inline\""));
    assert!(fails(&dir, &["slice", p, "amp", "--axis", "depth", "--index", "1", "-o", "x.png"], 1).contains("no axis \"depth\""));
    assert!(fails(&dir, &["slice", p, "amp", "--index", "1", "-o", "x.png"], 2).contains("give --axis and --index"));
    assert!(fails(&dir, &["slice", p, "amp", "--axis", "0", "--index", "1"], 2).contains("-o PICTURE.png is required"));
    assert!(!dir.join("x.png").exists());
}

#[test]
fn raw_binary_imports_in_either_order_and_byte_order() {
    let dir = scratch("raw");
    let shape = [4u64, 5, 6];
    let values: Vec<i32> = (0..120).map(|i| i * 1_000_003 - 60_000_000).collect();
    // The file holds the array in Fortran order (first axis fastest), big-endian.
    let mut raw = Vec::new();
    for k in 0..6 {
        for j in 0..5 {
            for i in 0..4 {
                raw.extend_from_slice(&values[i * 30 + j * 6 + k].to_be_bytes());
            }
        }
    }
    std::fs::write(dir.join("a.bin"), &raw).unwrap();
    ok(
        &dir,
        &[
            "import", "a.bin", "a.vds", "--dtype", "int32", "--shape", "4,5,6", "--order", "F", "--endian", "big", "--chunk", "3,2,4",
            "--name", "v",
        ],
    );
    let ds = Dataset::open(dir.join("a.vds")).unwrap();
    let got: Vec<i32> = ds.read_vec("v", &Region::full(&shape).unwrap(), Order::C).unwrap();
    assert_eq!(got, values);
    ok(&dir, &["export", "a.vds", "c.bin"]);
    let c: Vec<i32> = std::fs::read(dir.join("c.bin")).unwrap().chunks(4).map(|b| i32::from_le_bytes(b.try_into().unwrap())).collect();
    assert_eq!(c, values);
    assert!(fails(&dir, &["import", "a.bin", "b.vds", "--dtype", "int32", "--shape", "4,5,7"], 1)
        .contains("480 bytes, but int32 of shape [4, 5, 7] needs 560"));
    assert!(fails(&dir, &["import", "a.bin", "b.vds", "--shape", "4,5,6"], 2).contains("needs --dtype"));
    assert!(fails(&dir, &["import", "a.bin", "b.vds", "--dtype", "complex64", "--shape", "1"], 2).contains("complex64"));
    assert!(fails(&dir, &["import", "a.bin", "a.vds", "--dtype", "int32", "--shape", "4,5,6"], 1).contains("already exists"));
    assert!(!dir.join("b.vds").exists());
}

#[test]
fn ctrl_c_leaves_no_destination_behind() {
    let dir = scratch("interrupt");
    let src = dir.join("src.vds");
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", 1024))
        .axis(Axis::new("y", 8192))
        .variable(VariableBuilder::new("v", DType::Float64, &["x", "y"]).chunk(&[16, 8192]).codec(Codec::NONE))
        .create(&src)
        .unwrap();
    let data: Vec<f64> = (0..1024 * 8192).map(|i| (f64::from(i) * 0.001).sin()).collect();
    ds.write("v", &Region::full(&[1024, 8192]).unwrap(), Order::C, &data).unwrap();
    ds.close().unwrap();
    // Deflate level 9 in one-chunk blocks makes the copy take seconds; the
    // interrupt comes once the progress bar shows the copy under way.
    let mut child = Command::new(env!("CARGO_BIN_EXE_vds"))
        .args(["copy", "src.vds", "dst.vds", "--codec", "deflate:9"])
        .env("VDS_BLOCK_BYTES", "1")
        .env("VDS_PROGRESS", "always")
        .current_dir(&dir)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let mut first = [0u8; 16];
    std::io::Read::read_exact(&mut err, &mut first).unwrap();
    assert!(String::from_utf8_lossy(&first).contains("copying"), "{:?}", String::from_utf8_lossy(&first));
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{rest}");
    assert!(rest.contains("interrupted; dst.vds was not written"), "{rest}");
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(left, ["src.vds"], "only the source remains");
}

#[test]
fn usage_errors_and_help() {
    let dir = scratch("usage");
    assert!(fails(&dir, &[], 2).contains("Commands:"));
    assert!(fails(&dir, &["frobnicate"], 2).contains("unknown command \"frobnicate\""));
    assert!(ok(&dir, &["--help"]).contains("vds <command>"));
    assert!(ok(&dir, &["--version"]).contains("file format 1.8"));
    for cmd in ["info", "dump", "verify", "slice", "import", "export", "copy"] {
        let help = ok(&dir, &[cmd, "--help"]);
        assert!(help.contains(&format!("Usage: vds {cmd}")) && help.contains("Example:"), "{cmd}: {help}");
        assert!(fails(&dir, &[cmd, "--bogus"], 2).contains(&format!("vds {cmd}: unknown option --bogus")));
    }
    assert!(fails(&dir, &["info"], 2).contains("missing arguments"));
    assert!(fails(&dir, &["info", "a", "b"], 2).contains("unexpected argument \"b\""));
    assert!(fails(&dir, &["dump", "a", "v", "--region"], 2).contains("--region needs a value"));
    assert!(fails(&dir, &["info", "a", "--json=yes"], 2).contains("--json takes no value"));
    assert!(fails(&dir, &["import", "x.npy", "y.vds"], 1).contains("x.npy"));
    std::fs::write(dir.join("bad.npy"), b"\x93NUMPY\x01\x00\x10\x00{'descr': '<c8'}     \n").unwrap();
    assert!(fails(&dir, &["import", "bad.npy", "y.vds"], 1).contains("not a valid .npy file"));
    std::fs::write(dir.join("bad.ds"), b"ds-1.0\n{\"x\": {\".dims\": [\"a\"], \".size\": [100], \".type\": \"int32\", \".len\": 400}}\n")
        .unwrap();
    assert!(fails(&dir, &["import", "bad.ds", "y.vds"], 1).contains("run past the end of the file"));
    assert!(!dir.join("y.vds").exists());
}

#[test]
fn damaged_inputs_are_errors_never_crashes() {
    let dir = scratch("hostile");
    // Every prefix and a flipped byte at every position of a .npy and a .ds
    // file (sampled with a stride): each import succeeds or fails with one
    // line, never a panic (vds_in checks), and a failure leaves nothing.
    for (name, stride) in [("float32_3d.npy", 5), ("mixed.ds", 7)] {
        let bytes = std::fs::read(fixture(name)).unwrap();
        let ext = name.rsplit('.').next().unwrap();
        let mut cases: Vec<Vec<u8>> = (0..bytes.len()).step_by(stride).map(|n| bytes[..n].to_vec()).collect();
        for i in (0..bytes.len().min(2000)).step_by(stride) {
            let mut b = bytes.clone();
            b[i] ^= 0x5a;
            cases.push(b);
        }
        let mut failed = 0;
        for (k, case) in cases.iter().enumerate() {
            let input = format!("in{k}.{ext}");
            std::fs::write(dir.join(&input), case).unwrap();
            let mut args = vec!["import", &input, "out.vds", "--force"];
            if ext == "npy" {
                args.extend(["--name", "v"]);
            }
            let out = vds_in(&dir, &args);
            match out.status.code() {
                Some(0) => {}
                Some(1) => {
                    failed += 1;
                    assert!(String::from_utf8_lossy(&out.stderr).contains(&input), "the error names the file");
                }
                code => panic!("import of case {k} of {name} ended with {code:?}"),
            }
            std::fs::remove_file(dir.join(&input)).unwrap();
        }
        assert!(failed > cases.len() / 3, "{name}: only {failed} of {} damaged inputs were refused", cases.len());
    }
    let left: Vec<_> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).filter(|n| n.starts_with('.')).collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

#[test]
fn levels_of_detail_and_partitionings_in_info_dump_and_slice() {
    let dir = scratch("lod");
    let path = dir.join("lod.vds");
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("inline", 20))
        .axis(Axis::new("crossline", 18))
        .axis(Axis::new("time", 16))
        .variable(
            VariableBuilder::new("amp", DType::Float32, &["inline", "crossline", "time"])
                .chunk(&[8, 8, 8])
                .partitioning(&[1, 18, 16])
                .margin(1, 2)
                .levels_of_detail(3, &[], vds::LodMethod::Average),
        )
        .variable(
            VariableBuilder::new("q", DType::Float32, &["inline", "crossline"]).quantization(DType::UInt8, -1.0, 1.0).no_value(-1.0f32),
        )
        .create(&path)
        .unwrap();
    let data: Vec<f32> = (0..20 * 18 * 16).map(|i| (i % 101) as f32 - 50.0).collect();
    ds.write("amp", &Region::full(&[20, 18, 16]).unwrap(), Order::C, &data).unwrap();
    ds.close().unwrap();
    let p = path.to_str().unwrap();
    let text = ok(&dir, &["info", p]);
    assert!(text.contains("levels of detail: 3 (average over inline, crossline, time): 20x18x16, 10x9x8, 5x5x4"), "{text}");
    assert!(text.contains("partitionings: Dimensions_012LOD0 (8x8x8), Dimensions_01LOD0 (1x18x16)"), "{text}");
    assert!(text.contains("    quantized: uint8 over [-1.0,1.0]\n    no-value: -1.0\n"), "{text}");
    assert!(text.contains("    brick margins: 1 before, 2 after\n"), "{text}");
    // 3x3x2 bricks + 20 tiles at level 0, 2x2x1 + 10 at level 1, 1x1x1 + 5 at level 2.
    assert!(text.contains("58 chunks in 6 layers: stored 58, constant 0, fill 0, unwritten 0"), "{text}");
    let ds = Dataset::open(&path).unwrap();
    let mut want = vec![0f32; 9 * 8];
    ds.read_lod("amp", 1, Some(0), &Region::new(&[4, 0, 0], &[1, 9, 8]).unwrap(), Order::C, &mut want).unwrap();
    let csv = ok(&dir, &["dump", p, "amp", "--lod", "1", "--region", "4", "--csv"]);
    let got: Vec<f32> = csv.lines().skip(1).map(|l| l.rsplit(',').next().unwrap().parse().unwrap()).collect();
    assert_eq!(got, want);
    let text = ok(&dir, &["slice", p, "amp", "--lod", "2", "--axis", "time", "--index", "3", "-o", "l2.png"]);
    assert!(text.contains("5 x 5 pixels, inline across, crossline down, at time = 3"), "{text}");
    assert!(fails(&dir, &["slice", p, "amp", "--lod", "2", "--axis", "time", "--index", "4", "-o", "x.png"], 1)
        .contains("outside axis \"time\""));
}

/// The little-endian bytes of an .npy file's array, its dtype and shape, as NumPy reads them.
fn npy_as_numpy_reads_it(dir: &Path, file: &str) -> String {
    python(
        dir,
        &format!("import numpy as np; a = np.load({file:?}); print(a.dtype, a.shape, a.astype(a.dtype.newbyteorder('<')).tobytes().hex())"),
    )
}

#[test]
fn export_takes_a_level_a_partitioning_or_a_mask() {
    let dir = scratch("export-layers");
    let path = dir.join("l.vds");
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", 12))
        .axis(Axis::new("y", 10))
        .variable(
            VariableBuilder::new("v", DType::Int32, &["x", "y"])
                .chunk(&[4, 4])
                .partitioning(&[1, 10])
                .levels_of_detail(2, &["x", "y"], vds::LodMethod::Average)
                .missing_mask(true),
        )
        .create(&path)
        .unwrap();
    let data: Vec<i32> = (0..120).map(|i| i * 7 - 300).collect();
    let missing: Vec<bool> = (0..120).map(|i| i % 5 == 0).collect();
    ds.write_masked("v", &Region::full(&[12, 10]).unwrap(), Order::C, &data, &missing).unwrap();
    ds.close().unwrap();
    let p = path.to_str().unwrap();
    let ds = Dataset::open(&path).unwrap();
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let le = |v: &[i32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    // Level 1 (6 x 5), from either partitioning: the same values.
    let mut want = vec![0i32; 30];
    ds.read_lod("v", 1, Some(0), &Region::full(&[6, 5]).unwrap(), Order::C, &mut want).unwrap();
    for part in ["0", "1"] {
        ok(&dir, &["export", p, "l1.npy", "v", "--lod", "1", "--partitioning", part, "-f", "-q"]);
        assert_eq!(npy_as_numpy_reads_it(&dir, "l1.npy").trim(), format!("int32 (6, 5) {}", hex(&le(&want))));
    }
    // The mask of level 0, as bool.
    ok(&dir, &["export", p, "m.npy", "v", "--mask", "-q"]);
    let bits: Vec<u8> = missing.iter().map(|&m| u8::from(m)).collect();
    assert_eq!(npy_as_numpy_reads_it(&dir, "m.npy").trim(), format!("bool (12, 10) {}", hex(&bits)));
    // Levels and partitionings that do not exist, and options .ds cannot take.
    assert!(fails(&dir, &["export", p, "x.npy", "v", "--lod", "2"], 1).contains("level 2 does not exist"));
    assert!(fails(&dir, &["export", p, "x.npy", "v", "--partitioning", "2"], 1).contains("2 does not exist"));
    assert!(fails(&dir, &["export", p, "x.ds", "--lod", "1"], 2).contains("--lod is for .npy and raw output"));
    // Masks are layers too: the count of unwritten chunks includes them.
    let v: vds::serde_json::Value = vds::serde_json::from_str(&ok(&dir, &["info", p, "--json"])).unwrap();
    let c = &v["variables"][0]["chunks"];
    let all = ["stored", "constant", "fill", "unwritten"].iter().map(|k| c[k].as_u64().unwrap()).sum::<u64>();
    // 3x3 bricks + 12 tiles at level 0, 2x2 + 6 at level 1, each with a mask layer.
    assert_eq!(all, 2 * (9 + 12 + 4 + 6), "{c}");
}

#[test]
fn a_fifo_as_input_is_refused_without_blocking() {
    let dir = scratch("fifo-input");
    let status = Command::new("mkfifo").arg(dir.join("in.npy")).status().unwrap();
    assert!(status.success());
    let mut child = Command::new(env!("CARGO_BIN_EXE_vds"))
        .args(["import", "in.npy", "out.vds"])
        .current_dir(&dir)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > std::time::Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("vds import blocked on a FIFO");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("in.npy: not a regular file"), "{err}");
}

#[test]
fn sigterm_stops_a_command_stuck_in_one_long_call() {
    let dir = scratch("sigterm");
    let src = dir.join("src.vds");
    // One 128 MiB chunk: recompressing it with zstd level 19 is a single
    // library call of tens of seconds, with no point where the copy loop
    // can look at the signal flag.
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", 2048))
        .axis(Axis::new("y", 8192))
        .variable(VariableBuilder::new("v", DType::Float64, &["x", "y"]).chunk(&[2048, 8192]).codec(Codec::NONE))
        .create(&src)
        .unwrap();
    let data: Vec<f64> = (0..2048 * 8192).map(|i| (f64::from(i) * 0.001).sin()).collect();
    ds.write("v", &Region::full(&[2048, 8192]).unwrap(), Order::C, &data).unwrap();
    ds.close().unwrap();
    drop(data);
    let mut child = Command::new(env!("CARGO_BIN_EXE_vds"))
        .args(["copy", "src.vds", "dst.vds", "--codec", "zstd:19", "-q"])
        .current_dir(&dir)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted; stopped 2 s after the signal, partial output removed"), "{err}");
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(left, ["src.vds"], "only the source remains");
}

#[test]
fn counts_past_2_to_the_64_fail_instead_of_wrapping() {
    let dir = scratch("huge");
    let path = dir.join("huge.vds");
    // 2^31 x 2^30 float64 values (2^64 bytes) in chunks of 2 x 2; (2^22)^3
    // values in chunks of one value (2^66 chunks).
    DatasetBuilder::new()
        .axis(Axis::new("x", 1 << 31))
        .axis(Axis::new("y", 1 << 30))
        .axis(Axis::new("a", 1 << 22))
        .axis(Axis::new("b", 1 << 22))
        .axis(Axis::new("c", 1 << 22))
        .variable(VariableBuilder::new("v", DType::Float64, &["x", "y"]).chunk(&[2, 2]))
        .variable(VariableBuilder::new("w", DType::UInt8, &["a", "b", "c"]).chunk(&[1, 1, 1]))
        .create(&path)
        .unwrap()
        .close()
        .unwrap();
    let p = path.to_str().unwrap();
    let err = fails(&dir, &["export", p, "v.npy", "v"], 1);
    assert!(err.contains("more than 2^64 bytes"), "{err}");
    assert!(!dir.join("v.npy").exists());
    let err = fails(&dir, &["info", p], 1);
    assert!(err.contains("variable \"w\" has more than 2^64 chunks"), "{err}");
}

#[test]
fn copy_makes_chunks_of_blocks_and_info_shows_them() {
    let dir = scratch("blocks");
    let src = dir.join("src.vds");
    let shape = [40u64, 30, 50];
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("inline", shape[0]))
        .axis(Axis::new("crossline", shape[1]))
        .axis(Axis::new("time", shape[2]))
        .variable(VariableBuilder::new("amp", DType::Float32, &["inline", "crossline", "time"]).chunk(&[32, 32, 32]))
        .create(&src)
        .unwrap();
    let data: Vec<f32> = (0..shape.iter().product::<u64>()).map(|i| ((i % 977) as f32 * 0.21).cos()).collect();
    ds.write("amp", &Region::full(&shape).unwrap(), Order::C, &data).unwrap();
    ds.close().unwrap();
    ok(&dir, &["copy", "src.vds", "blocks.vds", "--blocks", "8,8,32"]);
    let ds = Dataset::open(dir.join("blocks.vds")).unwrap();
    assert_eq!(ds.variables()[0].block_shape(), Some(&[8u64, 8, 32][..]));
    assert!(ds.read_vec::<f32>("amp", &Region::full(&shape).unwrap(), Order::C).unwrap() == data);
    let text = ok(&dir, &["info", "blocks.vds"]);
    assert!(text.contains("blocks 8x8x32 inside each chunk"), "{text}");
    // Copied again without options, the blocks stay; with a new chunk shape they go.
    ok(&dir, &["copy", "blocks.vds", "kept.vds"]);
    assert_eq!(Dataset::open(dir.join("kept.vds")).unwrap().variables()[0].block_shape(), Some(&[8u64, 8, 32][..]));
    ok(&dir, &["copy", "blocks.vds", "whole.vds", "--chunk", "16,16,16"]);
    assert_eq!(Dataset::open(dir.join("whole.vds")).unwrap().variables()[0].block_shape(), None);
    assert!(fails(&dir, &["copy", "src.vds", "bad.vds", "--blocks", "64,8,8"], 1).contains("1 to its chunk extent"));
}

#[test]
fn copy_cloud_puts_the_index_first() {
    let dir = scratch("cloud");
    let shape = [300u64, 400];
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("y", shape[0]))
        .axis(Axis::new("x", shape[1]))
        .variable(VariableBuilder::new("v", DType::Int32, &["y", "x"]).chunk(&[10, 10]))
        .create(dir.join("src.vds"))
        .unwrap();
    let data: Vec<i32> = (0..shape[0] * shape[1]).map(|i| (i as i32).wrapping_mul(7919)).collect();
    ds.write("v", &Region::full(&shape).unwrap(), Order::C, &data).unwrap();
    ds.close().unwrap();
    ok(&dir, &["copy", "src.vds", "plain.vds"]);
    ok(&dir, &["copy", "src.vds", "cloud.vds", "--cloud"]);
    let space = |f: &str| Dataset::open(dir.join(f)).unwrap().space().unwrap();
    assert!(!space("plain.vds").index_first && space("cloud.vds").index_first);
    assert_eq!(space("cloud.vds").index_pages, space("plain.vds").index_pages);
    let ds = Dataset::open(dir.join("cloud.vds")).unwrap();
    assert!(ds.read_vec::<i32>("v", &Region::full(&shape).unwrap(), Order::C).unwrap() == data);
    let text = ok(&dir, &["info", "cloud.vds"]);
    assert!(text.contains("(cloud-optimized: all right after the head)"), "{text}");
    assert!(!ok(&dir, &["info", "plain.vds"]).contains("cloud-optimized"));
}

/// Copy with a new chunk shape gives deflate chunks of 1 MiB or more the
/// library's default blocks unless `--blocks none`; without one it keeps a
/// source's whole chunks.
#[test]
fn copy_uses_the_default_blocks_and_blocks_none_keeps_whole_chunks() {
    let dir = scratch("default-blocks");
    let shape = [64u64, 64, 64];
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("inline", shape[0]))
        .axis(Axis::new("crossline", shape[1]))
        .axis(Axis::new("time", shape[2]))
        .variable(VariableBuilder::new("amp", DType::Float32, &["inline", "crossline", "time"]).chunk(&[16, 64, 64]))
        .create(dir.join("src.vds"))
        .unwrap();
    let data: Vec<f32> = (0..shape.iter().product::<u64>()).map(|i| ((i % 977) as f32 * 0.21).cos()).collect();
    ds.write("amp", &Region::full(&shape).unwrap(), Order::C, &data).unwrap();
    ds.close().unwrap();
    let blocks_of = |name: &str| Dataset::open(dir.join(name)).unwrap().variables()[0].block_shape().map(<[u64]>::to_vec);
    let read =
        |name: &str| Dataset::open(dir.join(name)).unwrap().read_vec::<f32>("amp", &Region::full(&shape).unwrap(), Order::C).unwrap();
    ok(&dir, &["copy", "src.vds", "default.vds", "--chunk", "64,64,64", "--codec", "deflate:1"]);
    assert_eq!(blocks_of("default.vds"), Some(vec![32, 32, 32]));
    assert!(read("default.vds") == data);
    let text = ok(&dir, &["info", "default.vds"]);
    assert!(text.contains("blocks 32x32x32 inside each chunk"), "{text}");
    ok(&dir, &["copy", "src.vds", "whole.vds", "--chunk", "64,64,64", "--codec", "deflate:1", "--blocks", "none"]);
    assert_eq!(blocks_of("whole.vds"), None);
    ok(&dir, &["copy", "whole.vds", "whole2.vds"]);
    assert_eq!(blocks_of("whole2.vds"), None);
    ok(&dir, &["copy", "default.vds", "none.vds", "--blocks", "amp=none"]);
    assert_eq!(blocks_of("none.vds"), None);
    assert!(read("none.vds") == data);
    // A bounded codec takes no blocks: the source's are not kept.
    ok(&dir, &["copy", "default.vds", "lossy.vds", "--codec", "bounded:1%"]);
    assert_eq!(blocks_of("lossy.vds"), None);
    let (lo, hi) = data.iter().fold((f32::MAX, f32::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let bound = 0.01 * f64::from(hi - lo);
    assert!(read("lossy.vds").iter().zip(&data).all(|(a, b)| f64::from((a - b).abs()) <= bound));
}

/// A copy means what its source means: the no-value, quantized storage, the
/// missing-value mask and margins go with the values, and every value and
/// mask bit reads back as from the source.
#[test]
fn copy_keeps_no_value_quantization_mask_and_margins() {
    let dir = scratch("copy-meaning");
    let shape = [20u64, 30, 40];
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("inline", shape[0]))
        .axis(Axis::new("crossline", shape[1]))
        .axis(Axis::new("time", shape[2]))
        .variable(
            VariableBuilder::new("amp", DType::Float32, &["inline", "crossline", "time"])
                .chunk(&[8, 16, 16])
                .no_value(-999.0f32)
                .margin(1, 1),
        )
        .variable(VariableBuilder::new("q", DType::Float32, &["inline", "crossline", "time"]).chunk(&[8, 16, 16]).quantization(
            DType::UInt16,
            1000.0,
            1001.0,
        ))
        .variable(VariableBuilder::new("count", DType::Int32, &["inline", "crossline", "time"]).chunk(&[8, 16, 16]).missing_mask(true))
        .create(dir.join("src.vds"))
        .unwrap();
    let n = shape.iter().product::<u64>() as usize;
    let amp: Vec<f32> = (0..n).map(|i| if i % 17 == 0 { -999.0 } else { ((i % 977) as f32 * 0.21).cos() }).collect();
    // Stored integers written as such, over a range far from zero: float32
    // values there are coarser than the quantization step, so only a copy
    // of the stored integers keeps them all.
    let q: Vec<u16> = (0..n).map(|i| (i * 7919 % 65536) as u16).collect();
    let count: Vec<i32> = (0..n as i32).collect();
    let missing: Vec<bool> = (0..n).map(|i| i % 5 == 3).collect();
    let full = Region::full(&shape).unwrap();
    ds.write("amp", &full, Order::C, &amp).unwrap();
    ds.write("q", &full, Order::C, &q).unwrap();
    ds.write_masked("count", &full, Order::C, &count, &missing).unwrap();
    ds.close().unwrap();
    ok(&dir, &["copy", "src.vds", "dst.vds", "--codec", "zstd"]);
    let (src, dst) = (Dataset::open(dir.join("src.vds")).unwrap(), Dataset::open(dir.join("dst.vds")).unwrap());
    for (a, b) in src.variables().iter().zip(dst.variables()) {
        assert_eq!(
            (a.no_value(), a.quantization(), a.has_mask(), a.margin()),
            (b.no_value(), b.quantization(), b.has_mask(), b.margin()),
            "{}",
            a.name()
        );
    }
    assert_eq!(dst.variables()[0].no_value(), Some(vds::Scalar::Float(-999.0)));
    let (a, b): (Vec<f32>, Vec<f32>) = (src.read_vec("amp", &full, Order::C).unwrap(), dst.read_vec("amp", &full, Order::C).unwrap());
    assert!(a == b);
    let (a, b): (Vec<u16>, Vec<u16>) = (src.read_vec("q", &full, Order::C).unwrap(), dst.read_vec("q", &full, Order::C).unwrap());
    assert!(a == b, "the stored integers of a quantized variable changed");
    let got: Vec<i32> = dst.read_vec("count", &full, Order::C).unwrap();
    assert!(got == count);
    assert!(dst.read_mask("count", 0, None, &full, Order::C).unwrap() == missing);
    assert!(dst.verify_full().unwrap().is_ok());
}
