//! The native libvds benchmark: the suites of bench/README.md, each beside
//! its floor (the same bytes through a plain file, and a memcpy), printed as
//! Markdown tables.
//!
//! ```text
//! cargo run --release --example bench -- [--quick] [--dir DIR] [--suite a,b,c,d,e] [--codec uncompressed,deflate,zstd]
//! ```
//! Timings are the median of several runs on a warm cache. Files are written
//! with `Durability::None` (no fsync), as the peers and the floors write theirs,
//! over the previous run's file (the floors write over it and cut it to length).

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, Durability, Order, Region, VariableBuilder};

struct Opts {
    dir: PathBuf,
    quick: bool,
    suites: String,
    /// Suite (b)'s codecs to run: those whose label starts with one of these (all when empty).
    codecs: Vec<String>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Waits until the files written so far are on disk, so that the kernel's
/// writeback of them does not run during the reads timed next.
fn settle() {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() }
}

/// Runs `f` `reps` times and returns the median seconds.
fn time(reps: usize, mut f: impl FnMut()) -> f64 {
    median(
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64()
            })
            .collect(),
    )
}

struct Table {
    title: String,
    rows: Vec<(String, f64, u64, u64, f64)>, // name, seconds, bytes moved, bytes on disk, floor seconds
}

impl Table {
    fn new(title: &str) -> Table {
        Table { title: title.into(), rows: Vec::new() }
    }
    fn row(&mut self, name: &str, secs: f64, bytes: u64, disk: u64, floor: f64) {
        self.rows.push((name.into(), secs, bytes, disk, floor));
    }
    fn print(&self) {
        println!("\n### {}\n", self.title);
        println!("| operation | time | throughput | on disk | floor (plain file) | time / floor |");
        println!("|---|---:|---:|---:|---:|---:|");
        for (name, s, bytes, disk, floor) in &self.rows {
            let tp = if *bytes > 0 { format!("{:.0} MiB/s", *bytes as f64 / s / 1048576.0) } else { "-".into() };
            let disk = if *disk > 0 { format!("{:.1} MiB", *disk as f64 / 1048576.0) } else { "-".into() };
            let (fl, ratio) = if *floor > 0.0 { (fmt_time(*floor), format!("{:.2}", s / floor)) } else { ("-".into(), "-".into()) };
            println!("| {name} | {} | {tp} | {disk} | {fl} | {ratio} |", fmt_time(*s));
        }
    }
}

fn fmt_time(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.1} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

fn as_bytes(v: &[f32]) -> &[u8] {
    // SAFETY: f32 has no padding and any byte is initialized.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast(), v.len() * 4) }
}

/// The floor of a write: `data` written `copies` times into a plain file,
/// over what the file held and then cut to length, the cheapest way to
/// replace a file's bytes (as libvds overwrites a container): emptying it
/// first frees its blocks only to allocate them again, and ext4 flushes a
/// file emptied and rewritten when it is closed.
fn plain_write_copies(path: &Path, data: &[u8], copies: usize) {
    let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(false).open(path).unwrap();
    for _ in 0..copies {
        f.write_all(data).unwrap();
    }
    f.set_len((data.len() * copies) as u64).unwrap();
}

fn plain_write(path: &Path, data: &[u8]) {
    plain_write_copies(path, data, 1);
}

fn plain_read(path: &Path, out: &mut Vec<u8>) {
    out.clear();
    File::open(path).unwrap().read_to_end(out).unwrap();
}

fn disk(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// Suite (a): the ds-format paper's workloads: many tiny and small files, and a large one.
fn suite_a(o: &Opts) {
    let n = if o.quick { 200 } else { 1000 };
    let dir = o.dir.join("a");
    std::fs::create_dir_all(&dir).unwrap();
    let mut t = Table::new(&format!("(a) ds-format paper: {n} tiny files, {n} small files, one large file"));
    for (label, values) in [("tiny (one int64)", vec![42i64]), ("small (arange(1000) int64)", (0..1000).collect::<Vec<i64>>())] {
        let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let floor_w = time(3, || (0..n).for_each(|i| plain_write(&dir.join(format!("p{i}.bin")), &raw)));
        let mut buf = Vec::new();
        settle();
        let floor_r = time(3, || (0..n).for_each(|i| plain_read(&dir.join(format!("p{i}.bin")), &mut buf)));
        let len = values.len() as u64;
        let w = time(3, || {
            for i in 0..n {
                let mut ds = DatasetBuilder::new()
                    .overwrite(true)
                    .durability(Durability::None)
                    .axis(Axis::new("x", len))
                    .variable(VariableBuilder::new("v", DType::Int64, &["x"]).chunk(&[len]))
                    .create(dir.join(format!("v{i}.vds")))
                    .unwrap();
                ds.write("v", &Region::full(&[len]).unwrap(), Order::C, &values).unwrap();
                ds.close().unwrap();
            }
        });
        settle();
        let r = time(3, || {
            for i in 0..n {
                let ds = Dataset::open(dir.join(format!("v{i}.vds"))).unwrap();
                let got: Vec<i64> = ds.read_vec("v", &Region::full(&[len]).unwrap(), Order::C).unwrap();
                assert_eq!(got.len(), values.len());
            }
        });
        let bytes = raw.len() as u64 * n as u64;
        t.row(&format!("write {label}"), w, bytes, disk(&dir.join("v0.vds")), floor_w);
        t.row(&format!("read {label}"), r, bytes, 0, floor_r);
    }
    // One large file: 100 x 1000 x 1000 float64 (20 x 1000 x 1000 with --quick).
    let planes = if o.quick { 20 } else { 100 };
    let count = planes * 1000 * 1000;
    let data: Vec<f64> = (0..count).map(|i| (i % 7919) as f64 * 0.5).collect();
    // SAFETY: f64 has no padding.
    let raw = unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), data.len() * 8) };
    let floor_w = time(3, || plain_write(&dir.join("large.bin"), raw));
    let mut buf = Vec::with_capacity(raw.len());
    settle();
    let floor_r = time(3, || plain_read(&dir.join("large.bin"), &mut buf));
    let shape = [planes as u64, 1000, 1000];
    let mut out = vec![0f64; count];
    // The harness's chunks, the default ones (slabs, SPEC.md 3.1), and the
    // default before format 1.4 (cubes of about 1 MiB).
    for (label, chunk) in [("1x250x1000 chunks", Some([1, 250, 1000])), ("default chunks", None), ("50^3 chunks", Some([50, 50, 50]))] {
        let w = time(3, || {
            let mut var = VariableBuilder::new("v", DType::Float64, &["z", "y", "x"]);
            if let Some(c) = chunk {
                var.chunk(&c);
            }
            let mut ds = DatasetBuilder::new()
                .overwrite(true)
                .durability(Durability::None)
                .axis(Axis::new("z", shape[0]))
                .axis(Axis::new("y", 1000))
                .axis(Axis::new("x", 1000))
                .variable(&var)
                .create(dir.join("large.vds"))
                .unwrap();
            ds.write("v", &Region::full(&shape).unwrap(), Order::C, &data).unwrap();
            ds.close().unwrap();
        });
        out.fill(0.0);
        settle();
        let r = time(3, || {
            let ds = Dataset::open(dir.join("large.vds")).unwrap();
            ds.read("v", &Region::full(&shape).unwrap(), Order::C, &mut out).unwrap();
        });
        assert!(out == data);
        let what = format!("large ({planes}x1000x1000 float64, {label})");
        t.row(&format!("write {what}"), w, raw.len() as u64, disk(&dir.join("large.vds")), floor_w);
        t.row(&format!("read {what}"), r, raw.len() as u64, 0, floor_r);
    }
    let mut copy = vec![0u8; raw.len()];
    let memcpy = time(3, || copy.copy_from_slice(raw));
    t.row("memcpy of the large array", memcpy, raw.len() as u64, 0, 0.0);
    t.print();
}

/// A smooth synthetic signal.
fn volume(n: usize) -> Vec<f32> {
    let mut v = vec![0f32; n * n * n];
    for i in 0..n {
        for j in 0..n {
            for k in 0..n {
                let (x, y, z) = (i as f32 / n as f32, j as f32 / n as f32, k as f32 / n as f32);
                v[(i * n + j) * n + k] = (6.0 * x + 2.0 * y).sin() * (9.0 * z + 3.0 * x * y).cos() + 0.25 * (17.0 * z).sin();
            }
        }
    }
    v
}

/// Suite (b): a float32 volume in 64^3 chunks, uncompressed and with deflate.
/// Writes an n^3 volume in 64^3 bricks, with `tiles` also in 2-D tiles
/// across each pair of axes, `levels` levels of detail beyond the data
/// (averages), and with `blocks` inside the bricks.
fn write_bricks(path: &Path, vol: &[f32], codec: Codec, tiles: bool, levels: u8, blocks: Option<[u64; 3]>) {
    let nn = (vol.len() as f64).cbrt().round() as u64;
    let mut var = VariableBuilder::new("v", DType::Float32, &["i", "j", "k"]);
    var.chunk(&[64, 64, 64]).codec(codec).blocks(blocks.as_ref().map(|b| &b[..]));
    if tiles {
        var.partitioning(&[1, nn, nn]).partitioning(&[nn, 1, nn]).partitioning(&[nn, nn, 1]);
    }
    if levels > 0 {
        var.levels_of_detail(levels + 1, &[], vds::LodMethod::Average);
    }
    let mut ds = DatasetBuilder::new()
        .overwrite(true)
        .durability(Durability::None)
        .axis(Axis::new("i", nn))
        .axis(Axis::new("j", nn))
        .axis(Axis::new("k", nn))
        .variable(&var)
        .create(path)
        .unwrap();
    ds.write("v", &Region::full(&[nn, nn, nn]).unwrap(), Order::C, vol).unwrap();
    ds.close().unwrap();
}

fn suite_b(o: &Opts) {
    let n = if o.quick { 256 } else { 512 };
    let dir = o.dir.join("b");
    std::fs::create_dir_all(&dir).unwrap();
    let vol = volume(n);
    let raw = as_bytes(&vol);
    let floor_w = time(3, || plain_write(&dir.join("vol.bin"), raw));
    let mut buf = Vec::with_capacity(raw.len());
    settle();
    let floor_r = time(3, || plain_read(&dir.join("vol.bin"), &mut buf));
    let nn = n as u64;
    let shape = [nn, nn, nn];
    let codecs =
        [("uncompressed", Codec::NONE), ("deflate level 1 + shuffle", Codec::deflate(1)), ("zstd level 1 + shuffle", Codec::zstd(1))];
    for (label, codec) in codecs {
        if !o.codecs.is_empty() && !o.codecs.iter().any(|c| label.starts_with(c.as_str())) {
            continue;
        }
        let mut t = Table::new(&format!("(b) {n}^3 float32 volume, 64^3 chunks, {label}"));
        let path = dir.join("vol.vds");
        let write_volume = |path: &Path, tiles: bool| write_bricks(path, &vol, codec, tiles, 0, None);
        let w = time(3, || write_volume(&path, false));
        t.row("full write", w, raw.len() as u64, disk(&path), floor_w);
        // Each timed read opens the file afresh: the OS cache is warm, libvds's chunk cache is not.
        let mut out = vec![0f32; vol.len()];
        settle();
        let r = time(3, || Dataset::open(&path).unwrap().read("v", &Region::full(&shape).unwrap(), Order::C, &mut out).unwrap());
        assert!(out == vol);
        t.row("full read", r, raw.len() as u64, 0, floor_r);
        // The middle slice across `axis`, timed with the file opened afresh each time.
        let time_slice = |file: &Path, axis: usize| {
            let mut start = [0u64; 3];
            let mut sh = shape;
            start[axis] = nn / 2;
            sh[axis] = 1;
            let region = Region::new(&start, &sh).unwrap();
            let mut out = vec![0f32; n * n];
            time(5, || Dataset::open(file).unwrap().read("v", &region, Order::C, &mut out).unwrap())
        };
        let mut brick_slices = Vec::new();
        for (axis, name) in [(0, "slice across axis 0 (i = n/2)"), (1, "slice across axis 1"), (2, "slice across axis 2")] {
            let s = time_slice(&path, axis);
            t.row(name, s, (n * n * 4) as u64, 0, 0.0);
            brick_slices.push(s);
        }
        // The same volume with 2-D tiles across each pair of axes beside the bricks.
        let tiled = dir.join("tiled.vds");
        let wt = time(1, || write_volume(&tiled, true));
        // Its floor: the bytes of the bricks and of the three tile layers, four times the volume.
        let floor_w4 = time(3, || plain_write_copies(&dir.join("vol4.bin"), raw, 4));
        let _ = std::fs::remove_file(dir.join("vol4.bin"));
        t.row("full write, bricks + tiles across each axis", wt, raw.len() as u64, disk(&tiled), floor_w4);
        // And with 3 levels of detail (1/8, 1/64 and 1/512 of the volume), built at commit.
        let leveled = dir.join("leveled.vds");
        let wl = time(1, || write_bricks(&leveled, &vol, codec, false, 3, None));
        t.row("full write, bricks + 3 levels of detail", wl, raw.len() as u64, disk(&leveled), 0.0);
        let wtl = time(1, || write_bricks(&leveled, &vol, codec, true, 3, None));
        t.row("full write, bricks + tiles + 3 levels", wtl, raw.len() as u64, disk(&leveled), 0.0);
        let _ = std::fs::remove_file(&leveled);
        println!(
            "writes against bricks alone ({label}): tiles {:.2}x, 3 levels {:.2}x, tiles and 3 levels {:.2}x",
            wt / w,
            wl / w,
            wtl / w
        );
        settle();
        // A full read goes to the bricks whether or not tiles are beside them.
        let rt = time(3, || Dataset::open(&tiled).unwrap().read("v", &Region::full(&shape).unwrap(), Order::C, &mut out).unwrap());
        assert!(out == vol);
        t.row("full read, bricks + tiles across each axis", rt, raw.len() as u64, 0, floor_r);
        let mut tile_ratios = Vec::new();
        for (axis, from_bricks) in brick_slices.iter().enumerate() {
            let s = time_slice(&tiled, axis);
            t.row(&format!("slice across axis {axis} from 2-D tiles"), s, (n * n * 4) as u64, 0, 0.0);
            tile_ratios.push(from_bricks / s);
        }
        let mut seed = 7u64;
        let mut rnd = move |m: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        let bricks: Vec<[u64; 3]> = (0..1000).map(|_| [rnd(nn / 64) * 64, rnd(nn / 64) * 64, rnd(nn / 64) * 64]).collect();
        // Bricks and boxes: one handle for the 1000 reads, opened afresh for each timed run.
        let mut brick = vec![0f32; 64 * 64 * 64];
        let b = time(3, || {
            let ds = Dataset::open(&path).unwrap();
            bricks.iter().for_each(|s| ds.read("v", &Region::new(s, &[64, 64, 64]).unwrap(), Order::C, &mut brick).unwrap())
        });
        t.row("1000 random aligned 64^3 bricks", b, 1000 * 64 * 64 * 64 * 4, 0, 0.0);
        let boxes: Vec<[u64; 3]> = (0..1000).map(|_| [rnd(nn - 8), rnd(nn - 8), rnd(nn - 8)]).collect();
        let mut small = vec![0f32; 8 * 8 * 8];
        let sb = time(3, || {
            let ds = Dataset::open(&path).unwrap();
            boxes.iter().for_each(|s| ds.read("v", &Region::new(s, &[8, 8, 8]).unwrap(), Order::C, &mut small).unwrap())
        });
        t.row("1000 random 8^3 boxes", sb, 1000 * 512 * 4, 0, 0.0);
        t.print();
        let r: Vec<String> = tile_ratios.iter().map(|r| format!("{r:.1}x")).collect();
        println!("slices from 2-D tiles against bricks ({label}): {} faster along axes 0, 1, 2\n", r.join(", "));
    }
}

/// Suite (e): blocks inside 64^3 bricks (SPEC.md 6.5): for each block
/// shape, the size on disk, a full read, 1000 random traces, 1000 random
/// 8^3 boxes and a slice across each axis, against whole bricks.
fn suite_e(o: &Opts) {
    let n = if o.quick { 256 } else { 512 };
    let dir = o.dir.join("e");
    std::fs::create_dir_all(&dir).unwrap();
    let vol = volume(n);
    let nn = n as u64;
    let shape = [nn, nn, nn];
    let mut seed = 11u64;
    let mut rnd = move |m: u64| {
        seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (seed >> 33) % m
    };
    let traces: Vec<[u64; 3]> = (0..1000).map(|_| [rnd(nn), rnd(nn), 0]).collect();
    let boxes: Vec<[u64; 3]> = (0..1000).map(|_| [rnd(nn - 8), rnd(nn - 8), rnd(nn - 8)]).collect();
    let codecs = [("deflate level 1 + shuffle", Codec::deflate(1)), ("zstd level 1 + shuffle", Codec::zstd(1))];
    let shapes: [(&str, Option<[u64; 3]>); 5] = [
        ("whole 64^3 bricks", None),
        ("32^3 blocks", Some([32, 32, 32])),
        ("16^3 blocks", Some([16, 16, 16])),
        ("8x8x64 blocks (trace-shaped)", Some([8, 8, 64])),
        ("64x64x4 blocks (time-slice-shaped)", Some([64, 64, 4])),
    ];
    for (label, codec) in codecs {
        if !o.codecs.is_empty() && !o.codecs.iter().any(|c| label.starts_with(c.as_str())) {
            continue;
        }
        println!("\n### (e) {n}^3 float32 volume, 64^3 bricks, {label}: blocks inside the bricks\n");
        println!(
            "| layout | on disk | full read | 1000 random traces | 1000 random 8^3 boxes | slice axis 0 | slice axis 1 | slice axis 2 |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|");
        let mut base: Option<[f64; 6]> = None;
        for (name, blocks) in shapes {
            let path = dir.join("blocks.vds");
            write_bricks(&path, &vol, codec, false, 0, blocks);
            settle();
            let mut out = vec![0f32; vol.len()];
            let full = time(3, || Dataset::open(&path).unwrap().read("v", &Region::full(&shape).unwrap(), Order::C, &mut out).unwrap());
            assert!(out == vol);
            let mut trace = vec![0f32; n];
            let tr = time(3, || {
                let ds = Dataset::open(&path).unwrap();
                traces.iter().for_each(|s| ds.read("v", &Region::new(s, &[1, 1, nn]).unwrap(), Order::C, &mut trace).unwrap())
            });
            let mut small = vec![0f32; 512];
            let bx = time(3, || {
                let ds = Dataset::open(&path).unwrap();
                boxes.iter().for_each(|s| ds.read("v", &Region::new(s, &[8, 8, 8]).unwrap(), Order::C, &mut small).unwrap())
            });
            let mut slices = [0f64; 3];
            for (axis, t) in slices.iter_mut().enumerate() {
                let mut start = [0u64; 3];
                let mut sh = shape;
                start[axis] = nn / 2 + 3;
                sh[axis] = 1;
                let region = Region::new(&start, &sh).unwrap();
                let mut plane = vec![0f32; n * n];
                *t = time(5, || Dataset::open(&path).unwrap().read("v", &region, Order::C, &mut plane).unwrap());
            }
            let row = [full, tr, bx, slices[0], slices[1], slices[2]];
            let b = *base.get_or_insert(row);
            let cell = |k: usize| {
                if blocks.is_none() {
                    fmt_time(row[k])
                } else {
                    format!("{} ({:.2}x)", fmt_time(row[k]), row[k] / b[k])
                }
            };
            println!(
                "| {name} | {:.1} MiB | {} | {} | {} | {} | {} | {} |",
                disk(&path) as f64 / 1048576.0,
                cell(0),
                cell(1),
                cell(2),
                cell(3),
                cell(4),
                cell(5)
            );
        }
        println!("\n(each time in parentheses is the ratio to whole bricks: below 1 is faster)");
    }
}

/// Suite (c): open latency at a million chunks.
fn suite_c(o: &Opts) {
    let chunks: u64 = if o.quick { 1 << 16 } else { 1 << 20 };
    let dir = o.dir.join("c");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("many.vds");
    let t0 = Instant::now();
    let mut ds = DatasetBuilder::new()
        .overwrite(true)
        .durability(Durability::None)
        .axis(Axis::new("x", chunks * 4))
        .variable(VariableBuilder::new("v", DType::Int32, &["x"]).chunk(&[4]))
        .create(&path)
        .unwrap();
    // Stored chunks (not constant): each holds four different values.
    let values: Vec<i32> = (0..(chunks * 4) as i32).collect();
    ds.write("v", &Region::full(&[chunks * 4]).unwrap(), Order::C, &values).unwrap();
    ds.close().unwrap();
    let build = t0.elapsed().as_secs_f64();
    let last = Region::new(&[chunks * 4 - 4], &[4]).unwrap();
    settle();
    let lat = time(101, || {
        let ds = Dataset::open(&path).unwrap();
        let v: Vec<i32> = ds.read_vec("v", &last, Order::C).unwrap();
        assert_eq!(v[3], (chunks * 4 - 1) as i32);
    });
    let mut t = Table::new(&format!("(c) open a file of {chunks} chunks and read its last chunk"));
    t.row(&format!("write {chunks} chunks (once)"), build, chunks * 16, disk(&path), 0.0);
    t.row("open + read the last chunk (median of 101)", lat, 16, 0, 0.0);
    t.print();
}

/// Peak resident memory of this process so far (VmHWM), in bytes.
fn peak_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()))
        .map_or(0, |kb| kb * 1024)
}

/// Suite (d): a streaming write of several GiB, one chunk row at a time.
fn suite_d(o: &Opts) {
    let planes: u64 = if o.quick { 64 } else { 1024 }; // 1024 x 1024 x 1024 float32 = 4 GiB
    let dir = o.dir.join("d");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("stream.vds");
    let before = peak_rss();
    let t0 = Instant::now();
    let mut ds = DatasetBuilder::new()
        .overwrite(true)
        .durability(Durability::None)
        .axis(Axis::new("z", planes))
        .axis(Axis::new("y", 1024))
        .axis(Axis::new("x", 1024))
        .variable(VariableBuilder::new("v", DType::Float32, &["z", "y", "x"]).chunk(&[64, 64, 64]).codec(Codec::deflate(1)))
        .create(&path)
        .unwrap();
    let mut row = vec![0f32; 64 * 1024 * 1024];
    for z0 in (0..planes).step_by(64) {
        for (i, v) in row.iter_mut().enumerate() {
            *v = ((z0 as usize * 1024 * 1024 + i) % 65521) as f32 * 0.001;
        }
        ds.write("v", &Region::new(&[z0, 0, 0], &[64, 1024, 1024]).unwrap(), Order::C, &row).unwrap();
        ds.commit().unwrap();
    }
    ds.close().unwrap();
    let secs = t0.elapsed().as_secs_f64();
    let bytes = planes * 1024 * 1024 * 4;
    let mut t = Table::new(&format!(
        "(d) streaming write of {:.1} GiB, one 64-plane chunk row (256 MiB) per write",
        bytes as f64 / (1u64 << 30) as f64
    ));
    t.row("stream write, deflate level 1", secs, bytes, disk(&path), 0.0);
    t.print();
    println!(
        "\npeak resident memory: {:.0} MiB (before the suite: {:.0} MiB; one chunk row is 256 MiB)",
        peak_rss() as f64 / 1048576.0,
        before as f64 / 1048576.0
    );
}

fn main() {
    let mut o = Opts { dir: std::env::temp_dir().join("vds-bench"), quick: false, suites: "a,b,c,d".into(), codecs: Vec::new() };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--quick" => o.quick = true,
            "--dir" => {
                i += 1;
                o.dir = PathBuf::from(&args[i]);
            }
            "--suite" => {
                i += 1;
                o.suites = args[i].clone();
            }
            "--codec" => {
                i += 1;
                o.codecs = args[i].split(',').map(String::from).collect();
            }
            other => {
                eprintln!(
                    "unknown argument {other:?}; usage: bench [--quick] [--dir DIR] [--suite a,b,c,d,e] [--codec uncompressed,deflate,zstd]"
                );
                std::process::exit(2);
            }
        }
        i += 1;
    }
    std::fs::create_dir_all(&o.dir).unwrap();
    println!(
        "libvds {} native benchmark; files in {}; {} cores",
        env!("CARGO_PKG_VERSION"),
        o.dir.display(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    for s in o.suites.split(',') {
        match s {
            "a" => suite_a(&o),
            "b" => suite_b(&o),
            "c" => suite_c(&o),
            "d" => suite_d(&o),
            "e" => suite_e(&o),
            _ => eprintln!("unknown suite {s}"),
        }
    }
}
