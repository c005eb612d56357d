//! Speed of the error-bounded codec (SPEC.md 6.6), natively: writes a
//! smooth 256^3 float32 volume (bench suite b's function) and a noisy
//! seismic-like 128 x 128 x 512 one in 64^3 chunks with `Codec::bounded`
//! at 1e-2, 1e-3 and 1e-4 of each value range, reads each file back whole,
//! checks every value against the bound, and prints the ratio and the
//! encode and decode rates (median of the runs): per second of wall time
//! (the library encodes and decodes chunks on all cores) and, on Linux, per
//! second of the process's CPU time, which a busy machine disturbs less.
//!
//!     cargo run --release --example bounded_speed [-- RUNS [DIR]]
use std::time::Instant;
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, Durability, Order, Region, VariableBuilder};

fn smooth(n: usize) -> Vec<f32> {
    let mut v = Vec::with_capacity(n * n * n);
    let f = |i: usize| i as f32 / n as f32;
    for i in 0..n {
        for j in 0..n {
            for k in 0..n {
                let (x, y, z) = (f(i), f(j), f(k));
                v.push((6.0 * x + 2.0 * y).sin() * (9.0 * z + 3.0 * x * y).cos() + 0.25 * (17.0 * z).sin());
            }
        }
    }
    v
}

/// Dipping, folded reflectors (a sum of wavelets along time) plus noise.
fn seismic(ni: usize, nx: usize, nt: usize) -> Vec<f32> {
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut noise = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng >> 11) as f32 / (1u64 << 53) as f32 - 0.5
    };
    let mut v = Vec::with_capacity(ni * nx * nt);
    for i in 0..ni {
        for j in 0..nx {
            let shift = 0.15 * i as f32 + 0.08 * j as f32 + 12.0 * (i as f32 / 37.0).sin() * (j as f32 / 53.0).cos();
            for t in 0..nt {
                let p = t as f32 + shift;
                let s = (p * 0.21).sin() * (p * 0.037).cos() + 0.5 * (p * 0.53).sin() * (p * 0.011).sin();
                v.push(1000.0 * (s + 0.03 * noise()));
            }
        }
    }
    v
}

/// The process's user + system CPU seconds (Linux; 0 elsewhere).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name (which may hold spaces), from field 3.
    let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
    let ticks = |k: usize| fields.get(k).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15, in clock ticks of 1/100 s.
    (ticks(11) + ticks(12)) / 100.0
}

fn median(mut t: Vec<f64>) -> f64 {
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let runs: usize = args.next().map_or(3, |a| a.parse().expect("RUNS"));
    let dir = args.next().unwrap_or_else(|| std::env::temp_dir().to_string_lossy().into_owned());
    for (name, shape, data) in
        [("smooth 256^3", [256usize, 256, 256], smooth(256)), ("seismic 128x128x512", [128, 128, 512], seismic(128, 128, 512))]
    {
        let (lo, hi) = data.iter().fold((f32::MAX, f32::MIN), |(a, b), &x| (a.min(x), b.max(x)));
        let mib = (data.len() * 4) as f64 / (1 << 20) as f64;
        for frac in [1e-2, 1e-3, 1e-4] {
            let tol = frac * f64::from(hi - lo);
            let path = format!("{dir}/bounded_speed_{}_{frac:e}.vds", name.split(' ').next().unwrap());
            let (mut enc, mut dec, mut enc_cpu, mut dec_cpu) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            let mut back = Vec::new();
            for _ in 0..runs {
                let (t, c) = (Instant::now(), cpu_seconds());
                let mut ds = DatasetBuilder::new()
                    .overwrite(true)
                    .durability(Durability::None)
                    .axis(Axis::new("i", shape[0] as u64))
                    .axis(Axis::new("j", shape[1] as u64))
                    .axis(Axis::new("k", shape[2] as u64))
                    .variable(VariableBuilder::new("v", DType::Float32, &["i", "j", "k"]).chunk(&[64, 64, 64]).codec(Codec::bounded(tol)))
                    .create(&path)?;
                ds.write("v", &Region::full(&shape.map(|e| e as u64))?, Order::C, &data)?;
                ds.close()?;
                enc.push(t.elapsed().as_secs_f64());
                enc_cpu.push(cpu_seconds() - c);
                let (t, c) = (Instant::now(), cpu_seconds());
                let ds = Dataset::open(&path)?;
                back = ds.read_vec::<f32>("v", &Region::full(&shape.map(|e| e as u64))?, Order::C)?;
                dec.push(t.elapsed().as_secs_f64());
                dec_cpu.push(cpu_seconds() - c);
            }
            let beyond = data.iter().zip(&back).filter(|(&x, &y)| (f64::from(x) - f64::from(y)).abs() > tol).count();
            let size = std::fs::metadata(&path).expect("file").len();
            println!(
                "{name:20} tol {frac:.0e} of range: ratio {:6.2}  encode {:6.1} MiB/s ({:6.1} per CPU s)  decode {:6.1} MiB/s ({:6.1} per CPU s)  beyond bound {beyond}",
                (data.len() * 4) as f64 / size as f64,
                mib / median(enc),
                mib / median(enc_cpu),
                mib / median(dec),
                mib / median(dec_cpu),
            );
        }
    }
    Ok(())
}
