//! Files written by each released format version stay readable. The files in
//! tests/data/v1/ were written by format 1.0 with the code in `generate`,
//! those in tests/data/v1.1/ by format 1.1 with `generate_1_1`, those in
//! tests/data/v1.2/ by format 1.2 with `generate_1_2`, those in
//! tests/data/v1.3/ by format 1.3 with `generate_1_3`, those in
//! tests/data/v1.4/ by format 1.4 with `generate_1_4_tiny` and `generate_1_4_grown`,
//! those in tests/data/v1.5/ by format 1.5 with `generate_1_5_blocks` and `generate_1_5_bounded`,
//! those in tests/data/v1.6/ by format 1.6 with `generate_1_6_bounded`,
//! below and are never rewritten: a change that breaks reading them breaks
//! users' files. (`VDS_WRITE_GOLDEN=1 cargo test --test backward_compatibility`
//! writes them, for a new format version's directory only.)

mod common;
use vds::serde_json::json;
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, Order, Region, SlotPolicy, VariableBuilder};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/v1");

fn amplitude(i: u64, j: u64, k: u64) -> f32 {
    ((i as f32) * 0.3).sin() * ((j as f32) * 0.2).cos() + (k as f32) * 0.01
}
fn class(i: u64, j: u64) -> i16 {
    ((i * 7 + j * 3) % 11) as i16 - 5
}
fn present(i: u64, j: u64) -> bool {
    (i + j) % 3 != 0
}
fn counts(k: u64) -> u64 {
    if k < 25 {
        7
    } else {
        k * 1_000_000_007
    }
}

fn generate(name: &str, huge_attribute: bool) {
    let path = std::path::Path::new(DIR).join(name);
    let mut b = DatasetBuilder::new();
    b.axis(Axis::new("inline", 21).coordinates(100.0, 120.0))
        .axis(Axis::new("crossline", 13).unit("m").coordinates(0.0, 300.0))
        .axis(Axis::new("time", 35).unit("ms").coordinates(0.0, 136.0))
        .variable(
            VariableBuilder::new("amplitude", DType::Float32, &["inline", "crossline", "time"])
                .chunk(&[8, 8, 8])
                .codec(Codec::deflate(6))
                .fill(f32::NAN)
                .unit("Pa"),
        )
        .variable(VariableBuilder::new("class", DType::Int16, &["inline", "crossline"]).chunk(&[5, 6]).fill(-1))
        .variable(VariableBuilder::new("present", DType::Bool, &["inline", "crossline"]).chunk(&[16, 16]).codec(Codec::deflate(9)))
        .variable(VariableBuilder::new("counts", DType::UInt64, &["time"]).chunk(&[10]).attribute("note", "first chunks constant"))
        .attribute("created_by", "format 1.0 golden file")
        .external_slot(&format!("{name}.1"))
        .overwrite(true);
    let mut ds = b.create(&path).unwrap();
    let mut amp = Vec::new();
    for i in 0..21 {
        for j in 0..13 {
            for k in 0..35 {
                amp.push(amplitude(i, j, k));
            }
        }
    }
    // Leave inline 20 unwritten so the fill value is exercised.
    ds.write("amplitude", &Region::new(&[0, 0, 0], &[20, 13, 35]).unwrap(), Order::C, &amp[..20 * 13 * 35]).unwrap();
    ds.commit().unwrap();
    ds.set_slot_policy(SlotPolicy::RoundRobin(vec![0, 1])).unwrap();
    let cls: Vec<i16> = (0..21 * 13).map(|x| class(x / 13, x % 13)).collect();
    ds.write("class", &Region::full(&[21, 13]).unwrap(), Order::C, &cls).unwrap();
    let pr: Vec<bool> = (0..21 * 13).map(|x| present(x / 13, x % 13)).collect();
    ds.write("present", &Region::full(&[21, 13]).unwrap(), Order::C, &pr).unwrap();
    let c: Vec<u64> = (0..35).map(counts).collect();
    ds.write("counts", &Region::full(&[35]).unwrap(), Order::C, &c).unwrap();
    ds.set_attribute("history", Some(json!(if huge_attribute { "h".repeat(30000) } else { "two commits".into() }))).unwrap();
    ds.close().unwrap();
}

fn check(name: &str, huge_attribute: bool) {
    let path = std::path::Path::new(DIR).join(name);
    assert!(path.exists(), "{} is missing: golden files are committed, never regenerated", path.display());
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.axes().len(), 3);
    assert_eq!(ds.axes()[1].unit_str(), "m");
    assert_eq!(ds.axes()[2].last(), 136.0);
    assert_eq!(ds.variables().len(), 4);
    assert_eq!(ds.variable("amplitude").unwrap().unit(), "Pa");
    assert_eq!(ds.external_slots(), vec![format!("{name}.1")]);
    assert_eq!(ds.attributes()["created_by"], json!("format 1.0 golden file"));
    assert_eq!(ds.attributes()["history"].as_str().unwrap().len(), if huge_attribute { 30000 } else { 11 });
    assert_eq!(ds.variable_attributes("counts").unwrap()["note"], json!("first chunks constant"));
    let amp: Vec<f32> = ds.read_vec("amplitude", &Region::full(&[21, 13, 35]).unwrap(), Order::Fortran).unwrap();
    for i in 0..21 {
        for j in 0..13 {
            for k in 0..35 {
                let got = amp[(i + 21 * (j + 13 * k)) as usize];
                if i == 20 {
                    assert!(got.is_nan(), "unwritten amplitude {i},{j},{k} is {got}");
                } else {
                    assert_eq!(got, amplitude(i, j, k), "amplitude {i},{j},{k}");
                }
            }
        }
    }
    let cls: Vec<i16> = ds.read_vec("class", &Region::full(&[21, 13]).unwrap(), Order::C).unwrap();
    assert!(cls.iter().enumerate().all(|(x, &v)| v == class(x as u64 / 13, x as u64 % 13)));
    let pr: Vec<bool> = ds.read_vec("present", &Region::full(&[21, 13]).unwrap(), Order::C).unwrap();
    assert!(pr.iter().enumerate().all(|(x, &v)| v == present(x as u64 / 13, x as u64 % 13)));
    let c: Vec<u64> = ds.read_vec("counts", &Region::full(&[35]).unwrap(), Order::C).unwrap();
    assert_eq!(c, (0..35).map(counts).collect::<Vec<_>>());
    let s = ds.stats().unwrap();
    // Constant: counts chunks 0 and 1 (k < 20), and class chunk (4, 2), whose valid part is the one element (20, 12).
    assert_eq!((s.constant_chunks, s.fill_chunks), (3, 0), "{s:?}");
}

#[test]
fn format_1_0_files_stay_readable() {
    let files = [("golden-1.0.vds", false), ("golden-1.0-body-descriptor.vds", true)];
    if std::env::var_os("VDS_WRITE_GOLDEN").is_some() {
        std::fs::create_dir_all(DIR).unwrap();
        for (name, huge) in files {
            // Written once, by format 1.0; never again.
            if !std::path::Path::new(DIR).join(name).exists() {
                generate(name, huge);
            }
        }
    }
    for (name, huge) in files {
        check(name, huge);
    }
}

const DIR_1_1: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/v1.1");

/// Format 1.1: levels of detail and partitionings (SPEC.md 3.7).
fn generate_1_1(name: &str) {
    let path = std::path::Path::new(DIR_1_1).join(name);
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("inline", 21))
        .axis(Axis::new("crossline", 13))
        .axis(Axis::new("time", 35).unit("ms"))
        .variable(
            VariableBuilder::new("amplitude", DType::Float32, &["inline", "crossline", "time"])
                .chunk(&[8, 8, 8])
                .codec(Codec::deflate(6))
                .partitioning(&[1, 13, 35])
                .partitioning(&[21, 13, 1])
                .levels_of_detail(3, &["crossline", "time"], vds::LodMethod::Average),
        )
        .variable(VariableBuilder::new("class", DType::Int16, &["inline", "crossline"]).chunk(&[8, 8]).levels_of_detail(
            2,
            &[],
            vds::LodMethod::Nearest,
        ))
        .attribute("created_by", "format 1.1 golden file")
        .create(&path)
        .unwrap();
    let amp: Vec<f32> = (0..21 * 13 * 35).map(|x| amplitude(x / 455, (x / 35) % 13, x % 35)).collect();
    ds.write("amplitude", &Region::full(&[21, 13, 35]).unwrap(), Order::C, &amp).unwrap();
    let cls: Vec<i16> = (0..21 * 13).map(|x| class(x / 13, x % 13)).collect();
    ds.write("class", &Region::full(&[21, 13]).unwrap(), Order::C, &cls).unwrap();
    ds.close().unwrap();
}

fn check_1_1(name: &str) {
    let path = std::path::Path::new(DIR_1_1).join(name);
    assert!(path.exists(), "{} is missing: golden files are committed, never regenerated", path.display());
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.format_version(), [1, 1]);
    assert_eq!(ds.attributes()["created_by"], json!("format 1.1 golden file"));
    // Level 1 of amplitude: crossline and time halved, each sample the mean of the pair (in f64, rounded to f32).
    let mean = |a: f32, b: f32| ((f64::from(a) + f64::from(b)) / 2.0) as f32;
    // Axis by axis in axis order: crossline first, then time.
    let along_crossline = |i: u64, j: u64, t: u64| {
        if 2 * j + 1 < 13 {
            mean(amplitude(i, 2 * j, t), amplitude(i, 2 * j + 1, t))
        } else {
            amplitude(i, 2 * j, t)
        }
    };
    let l1 = |i: u64, j: u64, k: u64| {
        if 2 * k + 1 < 35 {
            mean(along_crossline(i, j, 2 * k), along_crossline(i, j, 2 * k + 1))
        } else {
            along_crossline(i, j, 2 * k)
        }
    };
    assert_eq!(ds.variable("amplitude").unwrap().lod_shape(1).unwrap(), [21, 7, 18]);
    for part in 0..3 {
        let got: Vec<f32> = {
            let mut v = vec![0f32; 21 * 7 * 18];
            ds.read_lod("amplitude", 1, Some(part), &Region::full(&[21, 7, 18]).unwrap(), Order::C, &mut v).unwrap();
            v
        };
        for (x, &g) in got.iter().enumerate() {
            let (i, j, k) = (x as u64 / 126, (x as u64 / 18) % 7, x as u64 % 18);
            assert_eq!(g.to_bits(), l1(i, j, k).to_bits(), "level 1, partitioning {part}, sample {i},{j},{k}");
        }
        let level0: Vec<f32> = {
            let mut v = vec![0f32; 21 * 13 * 35];
            ds.read_lod("amplitude", 0, Some(part), &Region::full(&[21, 13, 35]).unwrap(), Order::C, &mut v).unwrap();
            v
        };
        assert!(level0.iter().enumerate().all(|(x, &v)| v == amplitude(x as u64 / 455, (x as u64 / 35) % 13, x as u64 % 35)));
    }
    let (slice, shape) = ds.read_slice::<f32>("amplitude", 2, &[(2, 3)], Order::C).unwrap();
    assert_eq!(shape, [21, 4]);
    assert_eq!(slice.len(), 84);
    let mut c1 = vec![0i16; 11 * 7];
    ds.read_lod("class", 1, None, &Region::full(&[11, 7]).unwrap(), Order::C, &mut c1).unwrap();
    assert!(
        c1.iter().enumerate().all(|(x, &v)| v == class(2 * (x as u64 / 7), 2 * (x as u64 % 7))),
        "nearest takes the first of each pair"
    );
    assert!(ds.verify().unwrap().is_ok());
}

/// Checks golden file `name` of directory `dir`; writes it first with
/// `generate` if VDS_WRITE_GOLDEN is set and it does not exist yet.
fn golden(dir: &str, name: &str, generate: fn(&str), check: fn(&str)) {
    if std::env::var_os("VDS_WRITE_GOLDEN").is_some() && !std::path::Path::new(dir).join(name).exists() {
        std::fs::create_dir_all(dir).unwrap();
        generate(name);
    }
    check(name);
}

#[test]
fn format_1_1_files_stay_readable() {
    golden(DIR_1_1, "golden-1.1-layers.vds", generate_1_1, check_1_1);
}

const DIR_1_2: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/v1.2");

/// Format 1.2: a growable axis, grown by appends and shrunk once (SPEC.md 3.10).
fn generate_1_2(name: &str) {
    let path = std::path::Path::new(DIR_1_2).join(name);
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("time", 1).growable(Some(1000)).unit("s").coordinates(0.0, 0.0))
        .axis(Axis::new("station", 7))
        .variable(
            VariableBuilder::new("temperature", DType::Float32, &["time", "station"])
                .chunk(&[4, 7])
                .fill(f32::NAN)
                .codec(Codec::deflate(6))
                .levels_of_detail(2, &["time"], vds::LodMethod::Average),
        )
        .attribute("created_by", "format 1.2 golden file")
        .create(&path)
        .unwrap();
    let row = |t: u64| -> Vec<f32> { (0..7).map(|s| temperature(t, s)).collect() };
    ds.write("temperature", &Region::full(&[1, 7]).unwrap(), Order::C, &row(0)).unwrap();
    ds.commit().unwrap();
    for t in 1..12 {
        ds.append("temperature", "time", Order::C, &row(t)).unwrap();
        if t % 5 == 0 {
            ds.commit().unwrap();
        }
    }
    ds.commit().unwrap();
    // 12 -> 9 samples: chunk 2 (samples 8..12) keeps 8 only.
    ds.resize_axis("time", 9).unwrap();
    ds.close().unwrap();
}

fn temperature(t: u64, s: u64) -> f32 {
    10.0 + t as f32 * 0.25 - s as f32
}

fn check_1_2(name: &str) {
    let path = std::path::Path::new(DIR_1_2).join(name);
    assert!(path.exists(), "{} is missing: golden files are committed, never regenerated", path.display());
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.format_version(), [1, 2]);
    assert_eq!(ds.attributes()["created_by"], json!("format 1.2 golden file"));
    let time = &ds.axes()[0];
    assert_eq!((time.samples(), time.is_growable(), time.max_samples()), (9, true, Some(1000)));
    assert_eq!((time.first(), time.last()), (0.0, 8.0), "spacing 1 from an axis of one sample");
    let got: Vec<f32> = ds.read_vec("temperature", &Region::full(&[9, 7]).unwrap(), Order::C).unwrap();
    assert!(got.iter().enumerate().all(|(x, &v)| v == temperature(x as u64 / 7, x as u64 % 7)));
    let mut l1 = vec![0f32; 5 * 7];
    ds.read_lod("temperature", 1, None, &Region::full(&[5, 7]).unwrap(), Order::C, &mut l1).unwrap();
    for (x, &v) in l1.iter().enumerate() {
        let (t, s) = (x as u64 / 7, x as u64 % 7);
        let want = if t < 4 {
            ((f64::from(temperature(2 * t, s)) + f64::from(temperature(2 * t + 1, s))) / 2.0) as f32
        } else {
            temperature(8, s)
        };
        assert_eq!(v, want, "level 1 at {t},{s}");
    }
    assert_eq!(ds.stats().unwrap().stored_chunks, 3 + 2, "chunk 2 of level 0 and chunk 1 of level 1 remain; none beyond");
    assert!(ds.verify().unwrap().is_ok());
}

#[test]
fn format_1_2_files_stay_readable() {
    golden(DIR_1_2, "golden-1.2-growth.vds", generate_1_2, check_1_2);
}

const DIR_1_3: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/v1.3");

/// Format 1.3: zstd chunks (SPEC.md 6.3), with and without the shuffle, of a
/// multi-byte type and of bools, beside deflate and raw ones.
#[cfg(feature = "zstd")]
fn generate_1_3(name: &str) {
    let path = std::path::Path::new(DIR_1_3).join(name);
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("y", 40))
        .axis(Axis::new("x", 50))
        .variable(VariableBuilder::new("elevation", DType::Float32, &["y", "x"]).chunk(&[16, 16]).codec(Codec::zstd(3)))
        .variable(VariableBuilder::new("class", DType::Int16, &["y", "x"]).chunk(&[20, 25]).codec(Codec::zstd(19).with_shuffle(false)))
        .variable(VariableBuilder::new("wet", DType::Bool, &["y", "x"]).chunk(&[40, 50]).codec(Codec::zstd(1)))
        .variable(VariableBuilder::new("depth", DType::Float64, &["y", "x"]).chunk(&[40, 50]).codec(Codec::deflate(6)))
        .attribute("created_by", "format 1.3 golden file")
        .create(&path)
        .unwrap();
    let all = Region::full(&[40, 50]).unwrap();
    let at = |f: &dyn Fn(u64, u64) -> f64| -> Vec<f64> { (0..40 * 50).map(|k| f(k / 50, k % 50)).collect() };
    let heights: Vec<f32> = at(&|y, x| f64::from(elevation(y, x))).iter().map(|&v| v as f32).collect();
    ds.write("elevation", &all, Order::C, &heights).unwrap();
    let class: Vec<i16> = at(&|y, x| f64::from(class(y, x))).iter().map(|&v| v as i16).collect();
    ds.write("class", &all, Order::C, &class).unwrap();
    let wet: Vec<bool> = at(&|y, x| f64::from(u8::from(present(y, x)))).iter().map(|&v| v != 0.0).collect();
    ds.write("wet", &all, Order::C, &wet).unwrap();
    ds.write("depth", &all, Order::C, &at(&|y, x| f64::from(elevation(y, x)) * -2.0)).unwrap();
    ds.close().unwrap();
}

#[cfg(feature = "zstd")]
fn elevation(y: u64, x: u64) -> f32 {
    ((y as f32) * 0.1).sin() * 100.0 + (x as f32) * 0.5
}

#[cfg(feature = "zstd")]
fn check_1_3(name: &str) {
    let path = std::path::Path::new(DIR_1_3).join(name);
    assert!(path.exists(), "{} is missing: golden files are committed, never regenerated", path.display());
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.format_version(), [1, 3]);
    assert_eq!(ds.attributes()["created_by"], json!("format 1.3 golden file"));
    let codecs: Vec<Codec> = ds.variables().iter().map(|v| v.codec()).collect();
    assert_eq!(codecs, [Codec::zstd(3), Codec::zstd(19).with_shuffle(false), Codec::zstd(1), Codec::deflate(6)]);
    let all = Region::full(&[40, 50]).unwrap();
    let cells = || (0..40u64).flat_map(|y| (0..50u64).map(move |x| (y, x)));
    let got: Vec<f32> = ds.read_vec("elevation", &all, Order::C).unwrap();
    assert!(got.iter().zip(cells()).all(|(&v, (y, x))| v == elevation(y, x)));
    let got: Vec<i16> = ds.read_vec("class", &all, Order::C).unwrap();
    assert!(got.iter().zip(cells()).all(|(&v, (y, x))| v == class(y, x)));
    let got: Vec<bool> = ds.read_vec("wet", &all, Order::C).unwrap();
    assert!(got.iter().zip(cells()).all(|(&v, (y, x))| v == present(y, x)));
    let got: Vec<f64> = ds.read_vec("depth", &all, Order::C).unwrap();
    assert!(got.iter().zip(cells()).all(|(&v, (y, x))| v == f64::from(elevation(y, x)) * -2.0));
    // The chunks are stored compressed (tool/ `vds info` shows 17 zstd chunks
    // and one deflate chunk in this file), not raw.
    let stats = ds.stats().unwrap();
    assert!(stats.stored_bytes < stats.raw_bytes / 2, "{stats:?}");
    assert!(ds.verify().unwrap().is_ok());
}

#[test]
#[cfg(feature = "zstd")]
fn format_1_3_files_stay_readable() {
    golden(DIR_1_3, "golden-1.3-zstd.vds", generate_1_3, check_1_3);
}

/// A build without zstd reports the golden file as using an unsupported
/// feature, by name, rather than as corrupt.
#[test]
#[cfg(not(feature = "zstd"))]
fn format_1_3_zstd_files_are_an_unsupported_feature_without_zstd() {
    let e = Dataset::open(std::path::Path::new(DIR_1_3).join("golden-1.3-zstd.vds")).unwrap_err();
    assert_eq!(e.kind(), vds::ErrorKind::UnsupportedFeature, "{e}");
    assert!(e.to_string().contains("zstd"), "{e}");
    // Nor can such a build create a zstd variable.
    let dir = std::env::temp_dir().join(format!("vds-no-zstd-{}", std::process::id()));
    let e = DatasetBuilder::new()
        .axis(Axis::new("x", 10))
        .variable(VariableBuilder::new("v", DType::Float32, &["x"]).codec(Codec::zstd(1)))
        .create(&dir)
        .unwrap_err();
    assert_eq!(e.kind(), vds::ErrorKind::UnsupportedFeature, "{e}");
    assert!(e.to_string().contains("this build of libvds has no zstd"), "{e}");
    assert!(!dir.exists());
}

const DIR_1_4: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/v1.4");

/// Format 1.4: the compact layout (SPEC.md 1.1), as created for one value.
fn generate_1_4_tiny(name: &str) {
    let path = std::path::Path::new(DIR_1_4).join(name);
    let mut ds =
        DatasetBuilder::new().axis(Axis::new("x", 1)).variable(&VariableBuilder::new("v", DType::Int64, &["x"])).create(&path).unwrap();
    ds.write("v", &Region::full(&[1]).unwrap(), Order::C, &[42i64]).unwrap();
    ds.close().unwrap();
}

fn check_1_4_tiny(name: &str) {
    let path = std::path::Path::new(DIR_1_4).join(name);
    assert!(path.exists(), "{} is missing: golden files are committed, never regenerated", path.display());
    let bytes = std::fs::read(&path).unwrap();
    // Head of 384 bytes, two 128-byte slots, one 256-byte leaf.
    assert_eq!(bytes.len(), 896);
    assert_eq!(common::layout_of(&bytes), (384, 256));
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.format_version(), [1, 4]);
    assert_eq!(ds.read_vec::<i64>("v", &Region::full(&[1]).unwrap(), Order::C).unwrap(), [42]);
    assert!(ds.verify().unwrap().is_ok());
}

fn level(t: u64, s: u64) -> f64 {
    t as f64 * 0.25 + s as f64
}

/// Format 1.4: a compact container grown by appends, commit by commit, past
/// the size at which its index moves from 256-byte to 4096-byte pages.
fn generate_1_4_grown(name: &str) {
    let path = std::path::Path::new(DIR_1_4).join(name);
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("time", 64).growable(None))
        .axis(Axis::new("station", 8))
        .variable(VariableBuilder::new("level", DType::Float64, &["time", "station"]).chunk(&[64, 8]))
        .create(&path)
        .unwrap();
    for c in 0..18u64 {
        let rows: Vec<f64> = (0..64 * 8).map(|k| level(c * 64 + k / 8, k % 8)).collect();
        if c == 0 {
            ds.write("level", &Region::full(&[64, 8]).unwrap(), Order::C, &rows).unwrap();
        } else {
            ds.append("level", "time", Order::C, &rows).unwrap();
        }
        ds.commit().unwrap();
    }
    ds.close().unwrap();
}

fn check_1_4_grown(name: &str) {
    let path = std::path::Path::new(DIR_1_4).join(name);
    assert!(path.exists(), "{} is missing: golden files are committed, never regenerated", path.display());
    let (head, page) = common::layout_of(&std::fs::read(&path).unwrap());
    assert!(head % 4096 != 0 && page == 4096, "head {head}, page size {page}");
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.format_version(), [1, 4]);
    assert_eq!(ds.axes()[0].samples(), 18 * 64);
    let got: Vec<f64> = ds.read_vec("level", &Region::full(&[18 * 64, 8]).unwrap(), Order::C).unwrap();
    assert!(got.iter().enumerate().all(|(k, &v)| v == level(k as u64 / 8, k as u64 % 8)));
    assert_eq!(ds.stats().unwrap().stored_chunks, 18);
    assert!(ds.verify().unwrap().is_ok());
}

#[test]
fn format_1_4_files_stay_readable() {
    golden(DIR_1_4, "golden-1.4-tiny.vds", generate_1_4_tiny, check_1_4_tiny);
    golden(DIR_1_4, "golden-1.4-grown.vds", generate_1_4_grown, check_1_4_grown);
}

const DIR_1_5: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/v1.5");

fn wave(i: u64, j: u64, k: u64) -> f32 {
    ((i as f32 * 0.4).sin() + (j as f32 * 0.3).cos()) * k as f32
}

/// Format 1.5: chunks made of blocks (SPEC.md 6.5), with constant blocks
/// and blocks clipped at the chunk's edge.
fn generate_1_5_blocks(name: &str) {
    let path = std::path::Path::new(DIR_1_5).join(name);
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("inline", 20))
        .axis(Axis::new("crossline", 18))
        .axis(Axis::new("sample", 24))
        .variable(
            VariableBuilder::new("amplitude", DType::Float32, &["inline", "crossline", "sample"])
                .chunk(&[16, 16, 16])
                .blocks(Some(&[6, 8, 16]))
                .codec(Codec::deflate(6)),
        )
        .attribute("created_by", "format 1.5 golden file")
        .create(&path)
        .unwrap();
    let data: Vec<f32> = (0..20 * 18 * 24).map(|n| wave(n / (18 * 24), n / 24 % 18, n % 24)).collect();
    ds.write("amplitude", &Region::full(&[20, 18, 24]).unwrap(), Order::C, &data).unwrap();
    ds.close().unwrap();
}

fn check_1_5_blocks(name: &str) {
    let path = std::path::Path::new(DIR_1_5).join(name);
    assert!(path.exists(), "{} is missing: golden files are committed, never regenerated", path.display());
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.format_version(), [1, 5]);
    assert_eq!(ds.attributes()["created_by"], json!("format 1.5 golden file"));
    assert_eq!(ds.variable("amplitude").unwrap().block_shape(), Some(&[6u64, 8, 16][..]));
    let all: Vec<f32> = ds.read_vec("amplitude", &Region::full(&[20, 18, 24]).unwrap(), Order::C).unwrap();
    assert!(all.iter().enumerate().all(|(n, &v)| v == wave(n as u64 / (18 * 24), n as u64 / 24 % 18, n as u64 % 24)));
    // A trace, read block by block.
    let trace: Vec<f32> = ds.read_vec("amplitude", &Region::new(&[7, 9, 0], &[1, 1, 24]).unwrap(), Order::C).unwrap();
    assert!(trace.iter().enumerate().all(|(k, &v)| v == wave(7, 9, k as u64)));
    assert!(ds.verify_full().unwrap().is_ok());
}

#[test]
fn format_1_5_files_stay_readable() {
    golden(DIR_1_5, "golden-1.5-blocks.vds", generate_1_5_blocks, check_1_5_blocks);
}

/// The amplitude of the bounded golden file: a few dipping reflectors.
#[cfg(feature = "zstd")]
fn reflector(i: u64, j: u64, k: u64) -> f32 {
    let t = k as f32 - 0.3 * i as f32 - 0.2 * j as f32;
    (0.35 * t).sin() * (-0.002 * t * t).exp() * 3.0 + 0.05 * ((i * 7 + j * 3 + k) % 5) as f32
}

/// Tolerances of the bounded golden file.
#[cfg(feature = "zstd")]
const AMPLITUDE_TOLERANCE: f64 = 0.01;
#[cfg(feature = "zstd")]
const DEPTH_TOLERANCE: f64 = 1e-6;

/// What the bounded golden file's amplitude holds at (i, j, k): NaN,
/// infinities, the fill value -999.25 and the no-value marker 1e30 here and
/// there, else `reflector`.
#[cfg(feature = "zstd")]
fn amplitude_1_5(i: u64, j: u64, k: u64) -> f32 {
    match (i * 31 + j * 17 + k) % 97 {
        0 => f32::NAN,
        1 => f32::INFINITY,
        2 => f32::NEG_INFINITY,
        3 => -999.25,
        4 => 1e30,
        _ => reflector(i, j, k),
    }
}

#[cfg(feature = "zstd")]
fn depth_1_5(x: u64) -> f64 {
    1500.0 + x as f64 * 0.125 + (x as f64 * 0.01).sin() * 20.0
}

/// Format 1.5: the bounded codec (SPEC.md 6.6) on float32 (with specials,
/// a fill value and a no-value marker) and float64, by Lorenzo prediction.
#[cfg(feature = "zstd")]
fn generate_1_5_bounded(name: &str) {
    write_bounded(&std::path::Path::new(DIR_1_5).join(name), vds::Predictor::Lorenzo, "format 1.5 golden file");
}

#[cfg(feature = "zstd")]
fn check_1_5_bounded(name: &str) {
    check_bounded(&std::path::Path::new(DIR_1_5).join(name), [1, 5], "format 1.5 golden file", vds::Predictor::Lorenzo);
}

/// Format 1.6: the same by interpolation (SPEC.md 6.6.2).
#[cfg(feature = "zstd")]
fn generate_1_6_bounded(name: &str) {
    write_bounded(&std::path::Path::new(DIR_1_6).join(name), vds::Predictor::Interpolation, "format 1.6 golden file");
}

#[cfg(feature = "zstd")]
fn check_1_6_bounded(name: &str) {
    check_bounded(&std::path::Path::new(DIR_1_6).join(name), [1, 6], "format 1.6 golden file", vds::Predictor::Interpolation);
}

/// Format 1.7: the same by anchored interpolation (SPEC.md 6.6.3).
#[cfg(feature = "zstd")]
fn generate_1_7_bounded(name: &str) {
    write_bounded(&std::path::Path::new(DIR_1_7).join(name), vds::Predictor::Anchored, "format 1.7 golden file");
}

#[cfg(feature = "zstd")]
fn check_1_7_bounded(name: &str) {
    check_bounded(&std::path::Path::new(DIR_1_7).join(name), [1, 7], "format 1.7 golden file", vds::Predictor::Anchored);
}

/// Format 1.8: the same by graded anchored interpolation (SPEC.md 6.6.4).
#[cfg(feature = "zstd")]
fn generate_1_8_bounded(name: &str) {
    write_bounded(&std::path::Path::new(DIR_1_8).join(name), vds::Predictor::Graded, "format 1.8 golden file");
}

#[cfg(feature = "zstd")]
fn check_1_8_bounded(name: &str) {
    check_bounded(&std::path::Path::new(DIR_1_8).join(name), [1, 8], "format 1.8 golden file", vds::Predictor::Graded);
}

#[cfg(feature = "zstd")]
fn write_bounded(path: &std::path::Path, predictor: vds::Predictor, created_by: &str) {
    let codec = |tolerance| Codec::bounded_with(tolerance, predictor);
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("inline", 20))
        .axis(Axis::new("crossline", 24))
        .axis(Axis::new("time", 100))
        .variable(
            VariableBuilder::new("amplitude", DType::Float32, &["inline", "crossline", "time"])
                .chunk(&[16, 16, 64])
                .fill(-999.25f32)
                .no_value(1e30f32)
                .codec(codec(AMPLITUDE_TOLERANCE)),
        )
        .variable(VariableBuilder::new("depth", DType::Float64, &["time"]).codec(codec(DEPTH_TOLERANCE)))
        .attribute("created_by", created_by)
        .create(path)
        .unwrap();
    let a: Vec<f32> = (0..20 * 24 * 100u64).map(|n| amplitude_1_5(n / 2400, n / 100 % 24, n % 100)).collect();
    ds.write("amplitude", &Region::full(&[20, 24, 100]).unwrap(), Order::C, &a).unwrap();
    let d: Vec<f64> = (0..100).map(depth_1_5).collect();
    ds.write("depth", &Region::full(&[100]).unwrap(), Order::C, &d).unwrap();
    ds.close().unwrap();
}

#[cfg(feature = "zstd")]
fn check_bounded(path: &std::path::Path, version: [u16; 2], created_by: &str, predictor: vds::Predictor) {
    assert!(path.exists(), "{} is missing: golden files are committed, never regenerated", path.display());
    let ds = Dataset::open(path).unwrap();
    assert_eq!(ds.format_version(), version);
    assert_eq!(ds.attributes()["created_by"], json!(created_by));
    let v = &ds.variables()[0];
    assert!(
        matches!(v.codec().compression, vds::Compression::Bounded { tolerance, predictor: p, .. } if tolerance == AMPLITUDE_TOLERANCE && p == predictor)
    );
    let a: Vec<f32> = ds.read_vec("amplitude", &Region::full(&[20, 24, 100]).unwrap(), Order::C).unwrap();
    for (n, &got) in a.iter().enumerate() {
        let n = n as u64;
        let want = amplitude_1_5(n / 2400, n / 100 % 24, n % 100);
        if !want.is_finite() || want == -999.25 || want == 1e30 {
            assert_eq!(got.to_bits(), want.to_bits(), "element {n}");
        } else {
            // Both are float32: their difference is exact in float64.
            assert!((f64::from(got) - f64::from(want)).abs() <= AMPLITUDE_TOLERANCE, "element {n}: {got} for {want}");
        }
    }
    // The chunks are bounded streams, not the lossless fallback.
    let s = ds.variable_stats(0).unwrap();
    assert!(s.stored_bytes * 3 < s.raw_bytes, "{} stored bytes for {} raw", s.stored_bytes, s.raw_bytes);
    // Of the predictor's method (SPEC.md 6.6): each stream's header holds
    // the method, code width, flags and order, then the tolerance, found
    // here by its bytes. Method 4's grades (flag bits 2 to 4) are not all 0.
    let method = match predictor {
        vds::Predictor::Lorenzo => 1,
        vds::Predictor::Interpolation => 2,
        vds::Predictor::Anchored => 3,
        _ => 4,
    };
    let bytes = std::fs::read(path).unwrap();
    let tol = AMPLITUDE_TOLERANCE.to_le_bytes();
    let heads: Vec<&[u8]> = (4..bytes.len() - 8).filter(|&at| bytes[at..at + 8] == tol).map(|at| &bytes[at - 4..at]).collect();
    assert!(heads.len() >= 4, "{} bounded streams found", heads.len());
    assert!(heads.iter().all(|h| h[0] == method), "methods {:?}, expected {method}", heads.iter().map(|h| h[0]).collect::<Vec<_>>());
    if method == 4 {
        assert!(heads.iter().any(|h| h[2] >> 2 != 0), "every grade is 0");
    }
    let d: Vec<f64> = ds.read_vec("depth", &Region::full(&[100]).unwrap(), Order::C).unwrap();
    for (x, &got) in d.iter().enumerate() {
        let want = depth_1_5(x as u64);
        assert!((got - want).abs() <= DEPTH_TOLERANCE, "depth {x}: {got} for {want}");
    }
    assert!(ds.verify().unwrap().is_ok());
}

#[test]
#[cfg(feature = "zstd")]
fn format_1_5_bounded_files_stay_readable() {
    golden(DIR_1_5, "bounded.vds", generate_1_5_bounded, check_1_5_bounded);
}

#[cfg(feature = "zstd")]
const DIR_1_6: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/v1.6");

#[test]
#[cfg(feature = "zstd")]
fn format_1_6_bounded_files_stay_readable() {
    golden(DIR_1_6, "bounded-interpolation.vds", generate_1_6_bounded, check_1_6_bounded);
}

#[cfg(feature = "zstd")]
const DIR_1_7: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/v1.7");

#[test]
#[cfg(feature = "zstd")]
fn format_1_7_bounded_files_stay_readable() {
    golden(DIR_1_7, "bounded-anchored.vds", generate_1_7_bounded, check_1_7_bounded);
}

#[cfg(feature = "zstd")]
const DIR_1_8: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/v1.8");

#[test]
#[cfg(feature = "zstd")]
fn format_1_8_bounded_files_stay_readable() {
    golden(DIR_1_8, "bounded-graded.vds", generate_1_8_bounded, check_1_8_bounded);
}

/// A build without zstd reports the bounded golden file as using an
/// unsupported feature.
#[test]
#[cfg(not(feature = "zstd"))]
fn format_1_5_bounded_files_are_an_unsupported_feature_without_zstd() {
    let e = Dataset::open(std::path::Path::new(DIR_1_5).join("bounded.vds")).unwrap_err();
    assert_eq!(e.kind(), vds::ErrorKind::UnsupportedFeature, "{e}");
    for path in ["v1.6/bounded-interpolation.vds", "v1.7/bounded-anchored.vds", "v1.8/bounded-graded.vds"] {
        let e = Dataset::open(std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data")).join(path)).unwrap_err();
        assert_eq!(e.kind(), vds::ErrorKind::UnsupportedFeature, "{e}");
    }
}
