//! Helpers shared by the integration tests: scratch directories, a seeded
//! random generator, and index arithmetic for reference arrays.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// A fresh, empty scratch directory under the system temp dir, removed on drop.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!("vds-test-{}-{}-{}", name, std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
    pub fn path(&self, file: &str) -> PathBuf {
        self.0.join(file)
    }
    pub fn dir(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// SplitMix64: small, seeded, good enough for test data and random regions.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The seed for randomized tests: VDS_TEST_SEED if set, else a fixed default.
pub fn seed(default: u64) -> u64 {
    std::env::var("VDS_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}

/// C-order linear index of `idx` in an array of `shape`.
pub fn c_index(idx: &[u64], shape: &[u64]) -> usize {
    idx.iter().zip(shape).fold(0u64, |acc, (&i, &n)| acc * n + i) as usize
}

/// Fortran-order linear index of `idx` in an array of `shape`.
pub fn f_index(idx: &[u64], shape: &[u64]) -> usize {
    idx.iter().zip(shape).rev().fold(0u64, |acc, (&i, &n)| acc * n + i) as usize
}

/// Calls `f` with every index of `shape`, in C order.
pub fn for_each_index(shape: &[u64], mut f: impl FnMut(&[u64])) {
    if shape.contains(&0) {
        return;
    }
    let mut idx = vec![0u64; shape.len()];
    loop {
        f(&idx);
        let mut d = shape.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

/// Extracts `region` (start, shape, step) of a C-order `reference` of `shape`, in the given order.
pub fn extract<T: Copy + Default>(reference: &[T], shape: &[u64], start: &[u64], rshape: &[u64], step: &[u64], fortran: bool) -> Vec<T> {
    let n: u64 = rshape.iter().product();
    let mut out = vec![T::default(); n as usize];
    for_each_index(rshape, |i| {
        let g: Vec<u64> = (0..i.len()).map(|d| start[d] + i[d] * step[d]).collect();
        let dst = if fortran { f_index(i, rshape) } else { c_index(i, rshape) };
        out[dst] = reference[c_index(&g, shape)];
    });
    out
}

/// Writes `values` (laid out in the given order, shape `rshape`) into the C-order `reference`.
pub fn insert<T: Copy>(reference: &mut [T], shape: &[u64], start: &[u64], rshape: &[u64], step: &[u64], values: &[T], fortran: bool) {
    for_each_index(rshape, |i| {
        let g: Vec<u64> = (0..i.len()).map(|d| start[d] + i[d] * step[d]).collect();
        let src = if fortran { f_index(i, rshape) } else { c_index(i, rshape) };
        reference[c_index(&g, shape)] = values[src];
    });
}

/// Bitwise CRC32 (IEEE), independent of the library's, to re-seal structures the tests edit.
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// A container (SPEC.md 1 and 4) whose only commit, commit 1, holds `desc`
/// in the head and an empty index: any descriptor text, as a second reader
/// would meet it.
pub fn container_with_descriptor(desc: &[u8]) -> Vec<u8> {
    let h = (8 + 2 * desc.len() + 1024).div_ceil(4096) * 4096;
    let mut f = b"VDS 1.3\n".to_vec();
    f.extend_from_slice(desc);
    f.resize(h - 1, b' ');
    f.push(b'\n');
    f.resize(h + 512, 0);
    let mut slot = [0u8; 512];
    slot[..8].copy_from_slice(b"VDSCOMIT");
    slot[8..10].copy_from_slice(&1u16.to_le_bytes());
    slot[10..12].copy_from_slice(&3u16.to_le_bytes());
    slot[12..16].copy_from_slice(&4096u32.to_le_bytes());
    for (at, v) in [(16, 1u64), (24, h as u64), (32, h as u64 + 1024), (40, 8), (48, desc.len() as u64)] {
        slot[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }
    slot[56..60].copy_from_slice(&crc32(desc).to_le_bytes());
    let crc = crc32(&slot[..508]);
    slot[508..].copy_from_slice(&crc.to_le_bytes());
    f.extend_from_slice(&slot);
    f
}

/// The head length of a container: one past its second newline.
pub fn head_len(bytes: &[u8]) -> usize {
    let first = bytes.iter().position(|&b| b == b'\n').unwrap();
    first + 2 + bytes[first + 1..].iter().position(|&b| b == b'\n').unwrap()
}

/// The size of each commit slot of a container: 512, or 128 when its head
/// length is not a multiple of 4096 (the compact layout, SPEC.md 1.1).
pub fn slot_size(bytes: &[u8]) -> usize {
    if head_len(bytes) % 4096 == 0 {
        512
    } else {
        128
    }
}

/// Where the body of a container starts: after the head and both slots.
pub fn body_start(bytes: &[u8]) -> usize {
    head_len(bytes) + 2 * slot_size(bytes)
}

/// The head length and the newest intact commit's index page size of a
/// container image (SPEC.md 1, 1.1 and 4): which layout it has, and whether
/// a compact one has moved to 4096-byte pages.
pub fn layout_of(bytes: &[u8]) -> (usize, u32) {
    let h = head_len(bytes);
    let size = if h % 4096 == 0 { 512 } else { 128 };
    let slots = (0..2).map(|i| &bytes[h + i * size..h + (i + 1) * size]).filter(|s| s.starts_with(b"VDSCOMIT"));
    let newest = slots.max_by_key(|s| u64::from_le_bytes(s[16..24].try_into().unwrap())).unwrap();
    (h, u32::from_le_bytes(newest[12..16].try_into().unwrap()))
}

/// Replaces the section `name` of RELIABILITY.md (between its begin and end
/// markers) with `body`, so that the figures there come from the tests that
/// measured them. The file is created with a preamble if missing.
pub fn record_reliability(name: &str, body: &str) {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("RELIABILITY.md");
    let mut text = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        "# Reliability\n\nThe figures below are written by the tests that measured them \
         (`sh .ci/deps.sh && cargo test --release` rewrites each section); do not edit them by hand.\n"
            .to_string()
    });
    let (begin, end) = (format!("<!-- begin {name} -->\n"), format!("<!-- end {name} -->\n"));
    let section = format!("{begin}{body}{end}");
    match (text.find(&begin), text.find(&end)) {
        (Some(a), Some(b)) if b > a => text.replace_range(a..b + end.len(), &section),
        _ => {
            text.push('\n');
            text.push_str(&section);
        }
    }
    std::fs::write(&path, text).unwrap();
}

/// Runs a command, panicking with its output if it fails.
pub fn run(cmd: &mut std::process::Command) -> std::process::Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    if !out.status.success() {
        panic!(
            "{cmd:?} failed with {}\n--- stdout\n{}\n--- stderr\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    out
}

/// target/<profile>: where this test binary's profile puts libvds.so and libvds.a.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(Path::parent).unwrap().to_path_buf()
}

/// Builds libvds.so and libvds.a (`cargo test` builds only the rlib) and
/// returns the directory holding them, with the libvds.so.0 soname link.
pub fn libs() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = profile_dir();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = std::process::Command::new(cargo);
        cmd.args(["build", "--lib", "--quiet", "--manifest-path"])
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .arg("--target-dir")
            .arg(dir.parent().unwrap());
        if dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        run(&mut cmd);
        let link = dir.join("libvds.so.0");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink("libvds.so", &link).unwrap();
        dir
    })
}

/// The reference pyramid: level k from level k-1, one halved axis at a
/// time in axis order; `mean` of the pair, or the first of the pair when
/// `mean` is None (nearest) or the pair is cut by the extent.
pub fn halve<T: Copy + Default>(data: &[T], shape: &[u64], halved: &[bool], mean: Option<fn(T, T) -> T>) -> (Vec<T>, Vec<u64>) {
    let mut cur = data.to_vec();
    let mut shape = shape.to_vec();
    for d in 0..shape.len() {
        if !halved[d] {
            continue;
        }
        let mut next_shape = shape.clone();
        next_shape[d] = shape[d].div_ceil(2);
        let mut next = vec![T::default(); next_shape.iter().product::<u64>() as usize];
        for_each_index(&next_shape, |idx| {
            let mut a = idx.to_vec();
            a[d] *= 2;
            let x = cur[c_index(&a, &shape)];
            next[c_index(idx, &next_shape)] = match mean {
                Some(m) if a[d] + 1 < shape[d] => {
                    a[d] += 1;
                    m(x, cur[c_index(&a, &shape)])
                }
                _ => x,
            };
        });
        cur = next;
        shape = next_shape;
    }
    (cur, shape)
}

/// Floats: the mean in f64, rounded to f32.
pub fn halve_f32(data: &[f32], shape: &[u64], halved: &[bool], average: bool) -> (Vec<f32>, Vec<u64>) {
    halve(data, shape, halved, average.then_some((|a: f32, b: f32| ((f64::from(a) + f64::from(b)) / 2.0) as f32) as fn(f32, f32) -> f32))
}

/// Integers: the mean rounded to the nearest, halves away from zero.
pub fn halve_i32(data: &[i32], shape: &[u64], halved: &[bool], average: bool) -> (Vec<i32>, Vec<u64>) {
    halve(
        data,
        shape,
        halved,
        average.then_some((|a: i32, b: i32| ((i64::from(a) + i64::from(b)) as f64 / 2.0).round() as i32) as fn(i32, i32) -> i32),
    )
}

/// Counts the reads a storage serves, and the `read_many` batches (whose
/// reads are not counted in `reads`).
#[derive(Clone, Default)]
pub struct CountingStorage {
    pub inner: vds::MemoryStorage,
    pub reads: std::sync::Arc<std::sync::atomic::AtomicU64>,
    pub batches: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl vds::Storage for CountingStorage {
    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.read_at(offset, buf)
    }
    fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> std::io::Result<()> {
        self.batches.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        reads.iter_mut().try_for_each(|(offset, buf)| self.inner.read_at(*offset, buf))
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.inner.write_at(offset, data)
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.inner.set_len(len)
    }
    fn sync(&self) -> std::io::Result<()> {
        self.inner.sync()
    }
}
