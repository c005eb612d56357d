//! The libvds demo: writes a 256 x 256 x 256 float32 seismic-like volume in
//! 64^3 deflate-compressed bricks, plus 2-D tiles across the inline and
//! crossline axes and three levels of detail; reads three orthogonal slices
//! back, verifies them against the generated data, reads the time slice
//! from the tiles and from the bricks with the bytes each read, and prints
//! sizes and timings.
//!
//! ```text
//! cargo run --release --example demo [PATH]      # default: target/demo.vds
//! head -n 2 target/demo.vds                      # the version line and the descriptor
//! ```

use std::f32::consts::PI;
use std::time::Instant;
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, LodMethod, Order, Region, VariableBuilder};

const N: usize = 256;

/// A synthetic seismic volume: reflectors with random strengths, folded by a
/// smooth surface and cut by a normal fault, convolved with a 25 Hz Ricker
/// wavelet, with a little noise. C order: inline, crossline, time.
fn synthetic_volume() -> Vec<f32> {
    let dt = 0.004f32; // 4 ms
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut rand = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    // A long reflectivity series (four times oversampled), convolved once with the wavelet.
    let fine = 4 * 3 * N;
    let refl: Vec<f32> = (0..fine).map(|_| if rand() > 0.46 { rand() * 2.0 } else { 0.0 }).collect();
    let ricker = |t: f32| {
        let a = (PI * 25.0 * t).powi(2);
        (1.0 - 2.0 * a) * (-a).exp()
    };
    let half = 40;
    let wavelet: Vec<f32> = (-half..=half).map(|k| ricker(k as f32 * dt / 4.0)).collect();
    let trace: Vec<f32> = (0..fine)
        .map(|i| wavelet.iter().enumerate().map(|(k, w)| refl.get((i + k).wrapping_sub(half as usize)).copied().unwrap_or(0.0) * w).sum())
        .collect();
    let mut v = vec![0f32; N * N * N];
    for il in 0..N {
        for xl in 0..N {
            let (x, y) = (il as f32 / N as f32, xl as f32 / N as f32);
            // Folding plus a fault throw of 20 samples beyond inline 170.
            let mut shift = 60.0 * (2.0 * PI * x).sin() * (PI * y).cos() + 40.0 * y;
            if il as f32 > 170.0 - 30.0 * y {
                shift += 20.0;
            }
            let base = &mut v[(il * N + xl) * N..(il * N + xl + 1) * N];
            for (t, out) in base.iter_mut().enumerate() {
                let pos = (t as f32 + shift + 100.0) * 4.0;
                let i = pos as usize;
                let f = pos - i as f32;
                *out = trace[i] * (1.0 - f) + trace[i + 1] * f + 0.02 * rand();
            }
        }
    }
    v
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).unwrap_or_else(|| "target/demo.vds".into());
    if let Some(dir) = std::path::Path::new(&path).parent() {
        std::fs::create_dir_all(dir)?;
    }
    let t = Instant::now();
    let volume = synthetic_volume();
    let raw = (volume.len() * 4) as u64;
    println!("generated a {N}x{N}x{N} float32 volume ({:.1} MiB) in {:.2} s", mb(raw), t.elapsed().as_secs_f64());

    let t = Instant::now();
    let mut ds = DatasetBuilder::new()
        .overwrite(true)
        .axis(Axis::new("inline", N as u64).coordinates(1000.0, 1255.0))
        .axis(Axis::new("crossline", N as u64).coordinates(2000.0, 2255.0))
        .axis(Axis::new("time", N as u64).unit("ms").coordinates(0.0, 4.0 * (N as f64 - 1.0)))
        .variable(
            VariableBuilder::new("amplitude", DType::Float32, &["inline", "crossline", "time"])
                .chunk(&[64, 64, 64])
                // Time slices read one tile instead of 16 bricks.
                .partitioning(&[256, 256, 1])
                .levels_of_detail(3, &[], LodMethod::Average)
                .codec(Codec::deflate(1))
                .attribute("description", "synthetic folded and faulted reflectors, 25 Hz Ricker wavelet"),
        )
        .attribute("survey", "libvds demo")
        .create(&path)?;
    let full = Region::full(&[N as u64; 3])?;
    ds.write("amplitude", &full, Order::C, &volume)?;
    ds.close()?;
    let wt = t.elapsed().as_secs_f64();
    let on_disk = std::fs::metadata(&path)?.len();
    println!(
        "wrote {path}: {:.1} MiB of values as bricks, tiles and 3 levels of detail, {:.1} MiB on disk, in {wt:.2} s, committed with fsync",
        mb(raw),
        mb(on_disk)
    );

    let t = Instant::now();
    let ds = Dataset::open(&path)?;
    println!("opened in {:.3} ms", t.elapsed().as_secs_f64() * 1e3);
    let stats = ds.stats()?;
    println!(
        "{} stored chunks, {} constant chunks, {:.1} MiB of chunk data",
        stats.stored_chunks,
        stats.constant_chunks,
        mb(stats.stored_bytes)
    );

    let mid = (N / 2) as u64;
    let n = N as u64;
    let slices = [
        ("inline", Region::new(&[mid, 0, 0], &[1, n, n])?),
        ("crossline", Region::new(&[0, mid, 0], &[n, 1, n])?),
        ("time", Region::new(&[0, 0, mid], &[n, n, 1])?),
    ];
    for (name, region) in &slices {
        let t = Instant::now();
        let got: Vec<f32> = ds.read_vec("amplitude", region, Order::C)?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        // Verify every value against the generated volume.
        let (s, sh) = (region.start(), region.shape());
        let mut k = 0;
        for i in 0..sh[0] {
            for j in 0..sh[1] {
                for l in 0..sh[2] {
                    let idx = (((s[0] + i) * n + s[1] + j) * n + s[2] + l) as usize;
                    if got[k].to_bits() != volume[idx].to_bits() {
                        return Err(format!("{name} slice differs at {:?}", [s[0] + i, s[1] + j, s[2] + l]).into());
                    }
                    k += 1;
                }
            }
        }
        println!("read the {name} slice at index {mid} ({} values) in {ms:.1} ms: verified", got.len());
    }
    // The same time slice from the tiles and from the bricks, each with a cold cache.
    let time_slice = &slices[2].1;
    let mut from = Vec::new();
    for (what, partitioning) in [("tiles", 1u8), ("bricks", 0)] {
        let mut ds = Dataset::open(&path)?;
        ds.set_cache_size(0);
        let name = ds.variable("amplitude")?.layer_name(0, partitioning, "").unwrap_or_default();
        let mut plane = vec![0f32; N * N];
        let t = Instant::now();
        ds.read_lod("amplitude", 0, Some(partitioning), time_slice, Order::C, &mut plane)?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        println!("time slice from the {what} ({name}): {:.2} MiB read in {ms:.1} ms", mb(ds.stored_bytes_read()));
        from.push(plane);
    }
    if from[0] != from[1] {
        return Err("the time slice from the tiles differs from the bricks".into());
    }
    println!("the two time slices are identical");
    let (overview, shape) = ds.read_slice::<f32>("amplitude", 2, &[(2, mid / 4)], Order::C)?;
    println!("level of detail 2: a {} x {} time slice ({} values, each the mean of 4 x 4 x 4 samples)", shape[0], shape[1], overview.len());

    let t = Instant::now();
    let all: Vec<f32> = ds.read_vec("amplitude", &full, Order::C)?;
    let rt = t.elapsed().as_secs_f64();
    if all.iter().zip(&volume).any(|(a, b)| a.to_bits() != b.to_bits()) {
        return Err("the full volume differs".into());
    }
    println!("read the full volume in {rt:.2} s ({:.0} MiB/s): verified", mb(raw) / rt);
    println!("see what is inside: head -n 2 {path}");
    Ok(())
}
