//! SEG-Y in and out through the real `vds` binary, checked against segyio
//! (from target/pyenv, made by .ci/deps.sh): files segyio writes in every
//! sample format it writes, both byte orders, sorted by inline or
//! crossline, unsorted with missing traces, pre-stack, 2-D and with
//! extended textual headers are imported and compared value by value and
//! header by header with segyio's reading of them (tool/tests/segy_cases.py);
//! each regular file exported again is the same bytes; volumes that never
//! were SEG-Y export as files segyio reads; damaged files fail with one
//! line naming the trace and byte.

mod common;

use common::{ok, root, scratch, vds_in};
use std::path::Path;
use std::process::Command;

/// Runs vds and expects it to fail with exit status 1 and one line of error.
fn fails(dir: &Path, args: &[&str]) -> String {
    let err = common::fails(dir, args, 1);
    assert_eq!(err.lines().count(), 1, "{err}");
    err
}

/// Runs tool/tests/segy_cases.py with `mode` in `dir`; returns its output.
fn cases(dir: &Path, mode: &str) -> String {
    let py = root().join("target/pyenv/bin/python");
    assert!(py.exists(), "{} is missing: run `sh .ci/deps.sh`", py.display());
    let script = root().join("tool/tests/segy_cases.py");
    let out = Command::new(py).arg("-W").arg("ignore").arg(script).arg(mode).arg(dir).output().unwrap();
    assert!(
        out.status.success(),
        "segy_cases.py {mode}:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn segyio_files_import_exactly_and_export_byte_for_byte() {
    let dir = scratch("cases");
    let made: usize = cases(&dir, "make").trim().parse().unwrap();
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.unwrap().file_name().to_str().and_then(|n| n.strip_suffix(".sgy")).map(str::to_string))
        .collect();
    names.sort();
    assert_eq!(names.len(), made);
    for name in &names {
        let extra: &[&str] = if name == "prestack" { &["--prestack"] } else { &[] };
        let vds = format!("{name}.vds");
        ok(&dir, &[&["import", &format!("{name}.sgy"), &vds, "-q"], extra].concat());
        ok(&dir, &["export", &vds, &format!("{name}.amp.npy"), "amplitude"]);
        ok(&dir, &["export", &vds, &format!("{name}.head.npy"), "segy_trace_header"]);
        if name.contains("missing") {
            ok(&dir, &["export", &vds, &format!("{name}.mask.npy"), "amplitude", "--mask"]);
        }
        std::fs::write(dir.join(format!("{name}.info.json")), ok(&dir, &["info", &vds, "--json"])).unwrap();
        ok(&dir, &["export", &vds, &format!("{name}.back.sgy")]);
        let (a, b) =
            (std::fs::read(dir.join(format!("{name}.sgy"))).unwrap(), std::fs::read(dir.join(format!("{name}.back.sgy"))).unwrap());
        if name.contains("unsorted") {
            // Written back in inline order, missing traces left out: the same
            // file headers and the same traces (format 5, big-endian), reordered.
            let trace = 240 + 4 * usize::from(u16::from_be_bytes([a[3220], a[3221]]));
            let traces = |f: &[u8]| {
                let mut t: Vec<Vec<u8>> = f[3600..].chunks(trace).map(<[u8]>::to_vec).collect();
                t.sort();
                t
            };
            assert!(a[..3600] == b[..3600], "{name}: the file headers differ");
            assert!(traces(&a) == traces(&b), "{name}: the exported traces are not the original's");
        } else {
            assert!(a == b, "{name}: the exported file differs from the original");
        }
    }
    std::fs::write(dir.join("cases.json"), format!("[{}]", names.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(","))).unwrap();
    let report = cases(&dir, "check");
    assert!(report.trim().starts_with("checked ") && report.trim() != "checked 0", "{report}");
    // What info shows of a survey.
    let info = ok(&dir, &["info", "prestack.vds"]);
    assert!(info.contains("SEG-Y: rev 0.0, big-endian, format 5, 24 traces, 9 samples every 2000 us, sorted by inline"), "{info}");
    assert!(info.contains("offsets 100..400 step 100 (byte 37)"), "{info}");
    assert!(
        info.contains("world coordinates m: origin (1310, 2290) at inline 10, crossline 20; per inline (25, 4), per crossline (3, 12.5)"),
        "{info}"
    );
    let info = ok(&dir, &["info", "unsorted-missing.vds"]);
    assert!(info.contains("sorted by unsorted, 2 missing") || info.contains("unsorted, 2 missing"), "{info}");
    let info = ok(&dir, &["info", "2d.vds"]);
    assert!(info.contains("2-D line: cdp 500..506 step 1"), "{info}");
}

/// The key-byte options of `vds import` (rev 0's positions 9 and 21, an
/// offset byte, `--2d` with the CDP number at byte 21), on files segyio
/// writes with the sample interval only in the trace headers: the volume,
/// the grid and the sample axis are the ones segyio reads.
#[test]
fn key_bytes_from_the_command_line_and_the_interval_of_the_trace_headers() {
    let dir = scratch("keybytes");
    let script = r#"
import numpy as np, segyio
rng = np.random.default_rng(21)
def write(path, keys, vol, hdt, dt):
    spec = segyio.spec()
    spec.format, spec.samples, spec.tracecount = 5, list(range(vol.shape[-1])), len(keys)
    with segyio.create(path, spec) as f:
        f.bin.update(hdt=hdt, hns=vol.shape[-1], format=5)
        for t, (fields, cell) in enumerate(keys):
            f.header[t] = {**fields, segyio.su.ns: vol.shape[-1], segyio.su.dt: dt, segyio.su.delrt: 100}
            f.trace[t] = vol[cell]
    with segyio.open(path, ignore_geometry=True) as f:
        np.save(path + ".samples.npy", np.asarray(f.samples))
        np.save(path + ".amp.npy", np.stack([f.trace[t] for t in range(f.tracecount)]).reshape(vol.shape))
pre = rng.standard_normal((3, 2, 2, 7)).astype(np.float32)
keys = [({segyio.su.fldr: 10 + a, segyio.su.cdp: 100 + 4 * b, segyio.su.offset: 50 * (c + 1)}, (a, b, c))
        for a in range(3) for b in range(2) for c in range(2)]
write("rev0.sgy", keys, pre, 0, 4000)
line = rng.standard_normal((5, 6)).astype(np.float32)
write("line.sgy", [({segyio.su.cdp: 700 + k}, (k,)) for k in range(5)], line, 0, 0)
"#;
    common::python(&dir, script);
    ok(
        &dir,
        &["import", "rev0.sgy", "rev0.vds", "-q", "--inline-byte", "9", "--crossline-byte", "21", "--offset-byte", "37", "--prestack"],
    );
    ok(&dir, &["import", "line.sgy", "line.vds", "-q", "--2d", "--crossline-byte", "21"]);
    for name in ["rev0", "line"] {
        ok(&dir, &["export", &format!("{name}.vds"), &format!("{name}.amp.npy"), "amplitude"]);
        std::fs::write(dir.join(format!("{name}.info.json")), ok(&dir, &["info", &format!("{name}.vds"), "--json"])).unwrap();
    }
    let check = r#"
import json, numpy as np
for name in ["rev0", "line"]:
    assert np.array_equal(np.load(name + ".amp.npy"), np.load(name + ".sgy.amp.npy")), name
    samples = np.load(name + ".sgy.samples.npy")
    axis = [a for a in json.load(open(name + ".info.json"))["axes"] if a["name"] == "sample"][0]
    assert (axis["samples"], axis["first"], axis["last"]) == (len(samples), samples[0], samples[-1]), (name, axis, samples)
print("ok")
"#;
    assert_eq!(common::python(&dir, check).trim(), "ok");
    let info = ok(&dir, &["info", "rev0.vds"]);
    assert!(info.contains("7 samples every 4000 us (from the first trace header)"), "{info}");
    assert!(info.contains("inlines 10..12 step 1 (trace header byte 9)"), "{info}");
    assert!(info.contains("crosslines 100..104 step 4 (byte 21)"), "{info}");
    assert!(info.contains("offsets 50..100 step 50 (byte 37)"), "{info}");
    let info = ok(&dir, &["info", "line.vds"]);
    assert!(info.contains("6 samples every 4000 us (assumed: no header gives one)"), "{info}");
    assert!(info.contains("2-D line: cdp 700..704 step 1 (trace header byte 21)"), "{info}");
}

#[test]
fn any_volume_exports_as_segy_that_segyio_reads() {
    let dir = scratch("exports");
    let py = root().join("target/pyenv/bin/python");
    let script = r#"
import numpy as np
rng = np.random.default_rng(7)
np.save("vol3.npy", rng.standard_normal((3, 4, 6)).astype(np.float32))
np.save("vol4.npy", rng.standard_normal((2, 3, 2, 5)).astype(np.float32))
np.save("line.npy", rng.integers(-30000, 30000, (4, 8), dtype=np.int16))
"#;
    let out = Command::new(py).arg("-c").arg(script).current_dir(&dir).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for (name, axes) in [("vol3", "inline,crossline,time"), ("vol4", "inline,crossline,offset,time"), ("line", "cdp,time")] {
        ok(&dir, &["import", &format!("{name}.npy"), &format!("{name}.vds"), "--axes", axes]);
    }
    // Axis coordinates become header numbers and the sample interval: give
    // the inlines 5, 7, 9 and the samples 100, 104, ... ms through a copy
    // made with the library.
    for name in ["vol3", "vol4", "line"] {
        let src = vds::Dataset::open(dir.join(format!("{name}.vds"))).unwrap();
        let mut b = vds::DatasetBuilder::new();
        for a in src.axes() {
            let n = a.samples() as f64;
            let axis = vds::Axis::new(a.name(), a.samples());
            b.axis(match a.name() {
                "inline" => axis.coordinates(5.0, 5.0 + 2.0 * (n - 1.0)),
                "offset" => axis.coordinates(1.0, n),
                "time" => axis.unit("ms").coordinates(100.0, 100.0 + 4.0 * (n - 1.0)),
                _ => axis.coordinates(1.0, n),
            });
        }
        let v = &src.variables()[0];
        let axes: Vec<&str> = v.axes().iter().map(|&k| src.axes()[k].name()).collect();
        b.variable(&vds::VariableBuilder::new(name, v.dtype(), &axes));
        let path = dir.join(format!("{name}.c.vds"));
        let mut out = b.create(&path).unwrap();
        let mut buf = vec![0u8; v.shape().iter().product::<u64>() as usize * v.dtype().size()];
        let region = vds::Region::full(v.shape()).unwrap();
        src.read_bytes(0, &region, vds::Order::C, &mut buf).unwrap();
        out.write_bytes(0, &region, vds::Order::C, &buf).unwrap();
        out.close().unwrap();
        ok(&dir, &["export", &format!("{name}.c.vds"), &format!("{name}.sgy")]);
    }
    std::fs::write(dir.join("exports.json"), r#"["vol3", "vol4", "line"]"#).unwrap();
    assert_eq!(cases(&dir, "readback").trim(), "read 3");
    // And back in: the same values, the axes' numbers.
    ok(&dir, &["import", "vol3.sgy", "vol3.back.vds"]);
    let back = vds::Dataset::open(dir.join("vol3.back.vds")).unwrap();
    assert_eq!((back.axes()[0].first(), back.axes()[0].last()), (5.0, 9.0));
    assert_eq!((back.axes()[2].first(), back.axes()[2].last(), back.axes()[2].unit_str()), (100.0, 120.0, "ms"));
    // IBM floats on request.
    ok(&dir, &["export", "vol3.c.vds", "vol3.ibm.sgy", "--segy-format", "1"]);
    let ibm = std::fs::read(dir.join("vol3.ibm.sgy")).unwrap();
    assert_eq!(&ibm[3224..3226], &[0, 1]);
    let e = fails(&dir, &["export", "line.vds", "line5.sgy", "--segy-format", "5"]);
    assert!(e.contains("is int16; SEG-Y format 5 holds float32"), "{e}");
}

#[test]
fn damaged_segy_fails_with_the_trace_and_byte() {
    let dir = scratch("damaged");
    let py = root().join("target/pyenv/bin/python");
    let script = "import segyio, numpy as np\nsegyio.tools.from_array('ok.sgy', np.ones((2, 3, 10), dtype=np.float32))\n";
    let out = Command::new(py).arg("-c").arg(script).current_dir(&dir).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let good = std::fs::read(dir.join("ok.sgy")).unwrap();
    std::fs::write(dir.join("cut.sgy"), &good[..good.len() - 7]).unwrap();
    let e = fails(&dir, &["import", "cut.sgy", "cut.vds"]);
    assert!(e.contains("cut.sgy: trace 6 (byte 5000): the file ends 273 bytes into this trace"), "{e}");
    std::fs::write(dir.join("short.sgy"), &good[..3000]).unwrap();
    assert!(fails(&dir, &["import", "short.sgy", "short.vds"]).contains("fewer than the 3600 of SEG-Y"));
    let mut zero = good.clone();
    zero[3220..3222].fill(0);
    for t in 0..6 {
        zero[3600 + t * 280 + 114..3600 + t * 280 + 116].fill(0);
    }
    assert!(fails(&dir, &["import", "zero.sgy", "zero.vds"]).contains("No such file"));
    std::fs::write(dir.join("zero.sgy"), &zero).unwrap();
    assert!(fails(&dir, &["import", "zero.sgy", "zero.vds"]).contains("0 samples per trace"));
    let mut dup = good.clone();
    dup[3600 + 280 + 192..3600 + 280 + 196].copy_from_slice(&1i32.to_be_bytes());
    std::fs::write(dir.join("dup.sgy"), &dup).unwrap();
    // Tried as post-stack, then as pre-stack gathers by offset: both repeat.
    let e = fails(&dir, &["import", "dup.sgy", "dup.vds"]);
    assert!(e.contains("dup.sgy: trace 2 (byte 3880): duplicate trace: inline 1, crossline 1, offset 1, as trace 1"), "{e}");
    let out = vds_in(&dir, &["import", "ok.sgy", "ok.vds", "--inline-byte", "239"]);
    assert_eq!(out.status.code(), Some(2));
    // SEG-Y options on other formats, and other formats' options on SEG-Y.
    for (args, says) in [
        (&["import", "x.npy", "x.vds", "--inline-byte", "9"][..], "--inline-byte is for SEG-Y input only"),
        (&["import", "x.npy", "x.vds", "--2d"][..], "--2d is for SEG-Y input only"),
        (&["import", "ok.sgy", "x.vds", "--dtype", "int8"][..], "--dtype is for raw input only"),
        (&["import", "ok.sgy", "x.vds", "--name", "a"][..], "a segy file names its own"),
        (&["export", "x.vds", "x.npy", "--segy-format", "1"][..], "--segy-format is for SEG-Y output only"),
    ] {
        let out = vds_in(&dir, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(says), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    for f in ["cut.vds", "zero.vds", "dup.vds"] {
        assert!(!dir.join(f).exists(), "{f} was left behind");
    }
}

/// Rev 2 traces of different lengths (which segyio does not write): the
/// volume takes the longest, shorter traces read zeros past their end, and
/// the export writes each as long as it was.
#[test]
fn variable_length_rev2_traces_round_trip() {
    use vds_segy::writer::{binary_header, trace_header, TraceKeys};
    let dir = scratch("variable");
    let e = vds_segy::Endian::Little;
    let mut f = vds_segy::text::encode(&vds_segy::text::card(&["C 1 variable"]), vds_segy::Encoding::Ascii);
    let mut b = binary_header(e, vds_segy::SampleFormat::Int16, 5, 1000.0).unwrap();
    vds_segy::binary::set_field(&mut b, 303, vds_segy::binary::FieldType::I16, e, 0);
    f.extend(b);
    for (t, ns) in [3u64, 5, 4].into_iter().enumerate() {
        let keys =
            TraceKeys { index: t as u64, inline: 7, crossline: 10 + t as i32, samples: ns as u16, interval: 1000, ..TraceKeys::default() };
        f.extend(trace_header(e, &keys, [189, 193, 37]));
        f.extend((0..ns).flat_map(|s| (100 * t as i16 + s as i16).to_le_bytes()));
    }
    std::fs::write(dir.join("var.sgy"), &f).unwrap();
    ok(&dir, &["import", "var.sgy", "var.vds"]);
    // Integer samples take no relative tolerance.
    let out = vds_in(&dir, &["import", "var.sgy", "rel.vds", "--codec", "bounded:1%"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("a relative tolerance is for float32 and float64 variables") && err.contains("\"amplitude\" is int16"), "{err}");
    assert!(!dir.join("rel.vds").exists());
    let ds = vds::Dataset::open(dir.join("var.vds")).unwrap();
    let v: Vec<i16> = ds.read_vec("amplitude", &vds::Region::full(&[3, 5]).unwrap(), vds::Order::C).unwrap();
    assert_eq!(v, [0, 1, 2, 0, 0, 100, 101, 102, 103, 104, 200, 201, 202, 203, 0]);
    ok(&dir, &["export", "var.vds", "back.sgy"]);
    assert!(std::fs::read(dir.join("back.sgy")).unwrap() == f, "the export differs");
}

/// Ctrl-C during a SEG-Y import stops it and leaves no destination behind,
/// as for the other imports.
#[test]
fn ctrl_c_during_a_segy_import_leaves_nothing() {
    use std::io::Read;
    use std::process::Stdio;
    use vds_segy::writer::{binary_header, trace_header, TraceKeys};
    let dir = scratch("interrupt");
    let (n, ns) = (128i32, 500u64);
    let e = vds_segy::Endian::Big;
    let mut f = vds_segy::text::encode(&vds_segy::text::card(&["C 1 interrupt"]), vds_segy::Encoding::Ebcdic);
    f.extend(binary_header(e, vds_segy::SampleFormat::Float32, ns, 4000.0).unwrap());
    for t in 0..n * n {
        let keys =
            TraceKeys { index: t as u64, inline: t / n, crossline: t % n, samples: ns as u16, interval: 4000, ..TraceKeys::default() };
        f.extend(trace_header(e, &keys, [189, 193, 37]));
        f.extend((0..ns).flat_map(|s| ((s as f32 * 0.05 + t as f32 * 0.01).sin()).to_be_bytes()));
    }
    std::fs::write(dir.join("big.sgy"), &f).unwrap();
    drop(f);
    let mut child = Command::new(env!("CARGO_BIN_EXE_vds"))
        .args(["import", "big.sgy", "big.vds", "--codec", "deflate:9"])
        .env("VDS_BLOCK_BYTES", "1")
        .env("VDS_PROGRESS", "always")
        .current_dir(&dir)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    // Wait until the traces are being imported (after the header scan).
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !String::from_utf8_lossy(&seen).contains("importing traces") {
        assert_eq!(err.read(&mut byte).unwrap(), 1, "{}", String::from_utf8_lossy(&seen));
        seen.push(byte[0]);
    }
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{rest}");
    assert!(rest.contains("interrupted; big.vds was not written"), "{rest}");
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert_eq!(left, ["big.sgy"], "only the source remains");
}

/// `--codec bounded:P%` on SEG-Y: the tolerance is P percent of the range
/// of the samples as segyio reads them, every sample comes back within it,
/// and the trace headers stay exact.
#[test]
fn segy_import_with_a_relative_tolerance() {
    let dir = scratch("relative");
    let sgy = root().join("tool/tests/fixtures/survey.sgy").display().to_string();
    ok(&dir, &["import", &sgy, "exact.vds", "-q"]);
    ok(&dir, &["import", &sgy, "rel.vds", "--codec", "bounded:1%", "-q"]);
    ok(&dir, &["export", "rel.vds", "rel.npy", "amplitude"]);
    for name in ["exact", "rel"] {
        ok(&dir, &["export", &format!("{name}.vds"), &format!("{name}.head.npy"), "segy_trace_header"]);
    }
    let script = format!(
        r#"
import numpy as np, segyio
with segyio.open({sgy:?}, iline=189, xline=193) as f:
    cube = segyio.tools.cube(f).astype(np.float64)
t = float(0.01 * (cube.max() - cube.min()))
back = np.load("rel.npy").astype(np.float64)
assert back.shape == cube.shape, (back.shape, cube.shape)
assert np.abs(back - cube).max() <= t, (np.abs(back - cube).max(), t)
assert (back != cube).any(), "stored without loss"
assert np.array_equal(np.load("rel.head.npy"), np.load("exact.head.npy"))
print(repr(t))
"#
    );
    let py = root().join("target/pyenv/bin/python");
    assert!(py.exists(), "{} is missing: run `sh .ci/deps.sh`", py.display());
    let out = Command::new(py).arg("-W").arg("ignore").arg("-c").arg(script).current_dir(&dir).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let want: f64 = String::from_utf8(out.stdout).unwrap().trim().parse().unwrap();
    let info = ok(&dir, &["info", "rel.vds"]);
    let amp = info.split("\n  amplitude ").nth(1).unwrap();
    let shown: f64 = amp.split("error <= ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    assert_eq!(shown, want, "{info}");
    let heads = info.split("\n  segy_trace_header ").nth(1).unwrap().lines().nth(1).unwrap();
    assert!(heads.contains("zstd level 3"), "{info}");

    // Rev 2 traces of different lengths: the samples past a short trace's
    // end are stored as 0, and count in the range as such.
    use vds_segy::writer::{binary_header, trace_header, TraceKeys};
    let e = vds_segy::Endian::Little;
    let mut f = vds_segy::text::encode(&vds_segy::text::card(&["C 1 variable"]), vds_segy::Encoding::Ascii);
    let mut b = binary_header(e, vds_segy::SampleFormat::Float32, 5, 1000.0).unwrap();
    vds_segy::binary::set_field(&mut b, 303, vds_segy::binary::FieldType::I16, e, 0);
    f.extend(b);
    let mut want = Vec::new();
    for (t, ns) in [3u64, 5, 4].into_iter().enumerate() {
        let keys =
            TraceKeys { index: t as u64, inline: 7, crossline: 10 + t as i32, samples: ns as u16, interval: 1000, ..TraceKeys::default() };
        f.extend(trace_header(e, &keys, [189, 193, 37]));
        let trace: Vec<f32> = (0..ns).map(|s| 50.0 + 10.0 * t as f32 + s as f32).collect();
        f.extend(trace.iter().flat_map(|v| v.to_le_bytes()));
        want.extend(trace.iter().copied().chain(std::iter::repeat(0.0)).take(5));
    }
    std::fs::write(dir.join("var.sgy"), &f).unwrap();
    ok(&dir, &["import", "var.sgy", "var.vds", "--codec", "bounded:10%"]);
    let hi = want.iter().copied().fold(0f32, f32::max);
    let tol = 0.1 * f64::from(hi);
    let info = ok(&dir, &["info", "var.vds"]);
    assert!(info.contains(&format!("bounded, error <= {tol} (graded anchored interpolation prediction, zstd level 3)")), "{info}");
    let got: Vec<f32> = vds::Dataset::open(dir.join("var.vds"))
        .unwrap()
        .read_vec("amplitude", &vds::Region::full(&[3, 5]).unwrap(), vds::Order::C)
        .unwrap();
    for (g, w) in got.iter().zip(&want) {
        assert!((f64::from(*g) - f64::from(*w)).abs() <= tol, "{g} for {w}");
    }
}
