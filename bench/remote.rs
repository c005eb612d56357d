//! The remote benchmark (bench/README.md, "Over HTTP"): a float32 volume
//! in 64^3 deflate bricks with inline tiles beside them, served over HTTP
//! range requests on loopback with a fixed latency added to every request
//! (20 ms by default, a distant region of a cloud); for opening, one
//! inline slice (read from the tiles), one brick and the whole volume,
//! each from a fresh open: time, requests, round trips and bytes fetched.
//! A last row fetches as many bytes as the whole-volume read did, in 8 MiB
//! ranges, 16 in flight, without decoding anything: what the link gives
//! this client, the floor of the whole-volume read.
//!
//! cargo run --release -p vds --features remote --example remote_bench -- [--quick] [--latency-ms N] [--bandwidth-mbit N]

#[path = "../tests/remote_common/mod.rs"]
mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};
use vds::remote::RemoteStorage;
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, Durability, Order, Region, VariableBuilder};

fn main() -> vds::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let latency =
        args.iter().position(|a| a == "--latency-ms").and_then(|i| args.get(i + 1)).map_or(20, |v| v.parse().expect("--latency-ms N"));
    let mbit: u64 = args
        .iter()
        .position(|a| a == "--bandwidth-mbit")
        .and_then(|i| args.get(i + 1))
        .map_or(0, |v| v.parse().expect("--bandwidth-mbit N"));
    let n: u64 = if quick { 256 } else { 512 };
    let dir = common::TempDir::new("bench");
    let path = dir.0.join("volume.vds");
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("inline", n))
        .axis(Axis::new("crossline", n))
        .axis(Axis::new("time", n))
        .variable(
            VariableBuilder::new("amplitude", DType::Float32, &["inline", "crossline", "time"])
                .chunk(&[64, 64, 64])
                .codec(Codec::deflate(1))
                .partitioning(&[1, n, n]),
        )
        .durability(Durability::None)
        .create(&path)?;
    let plane = (n * n) as usize;
    for i in (0..n).step_by(64) {
        let values: Vec<f32> = (0..64 * plane)
            .map(|k| signal(i + (k / plane) as u64, ((k / n as usize) % n as usize) as u64, (k % n as usize) as u64))
            .collect();
        ds.write("amplitude", &Region::new(&[i, 0, 0], &[64, n, n])?, Order::C, &values)?;
    }
    ds.close()?;
    let size = std::fs::metadata(&path).map_err(|e| vds::Error::io("reading the volume's size", e))?.len();

    let server = common::FaultServer::start();
    server.set_latency(Duration::from_millis(latency));
    server.set_bandwidth(mbit * 1_000_000 / 8);
    server.put("volume.vds", std::fs::read(&path).map_err(|e| vds::Error::io("reading the volume", e))?);
    let url = server.url("volume.vds");
    println!(
        "{n}^3 float32 ({} MiB of values, {:.1} MiB on the server), {latency} ms added to every request{}\n",
        (n * n * n * 4) >> 20,
        size as f64 / (1 << 20) as f64,
        if mbit > 0 { format!(", a link of {mbit} Mbit/s") } else { String::new() }
    );
    println!("| workload | time | requests | round trips | MiB fetched |");
    println!("|---|---:|---:|---:|---:|");
    let mid = n / 2;
    type Work = Box<dyn Fn(&Dataset) -> vds::Result<usize>>;
    let rows: Vec<(&str, Work)> = vec![
        ("open", Box::new(|_| Ok(0))),
        ("open + one inline slice (tiles)", Box::new(move |ds| Ok(ds.read_slice::<f32>("amplitude", 0, &[(0, mid)], Order::C)?.0.len()))),
        (
            "open + one 64^3 brick",
            Box::new(move |ds| Ok(ds.read_vec::<f32>("amplitude", &Region::new(&[mid, mid, mid], &[64, 64, 64])?, Order::C)?.len())),
        ),
        ("open + the whole volume", Box::new(move |ds| Ok(ds.read_vec::<f32>("amplitude", &Region::full(&[n, n, n])?, Order::C)?.len()))),
    ];
    let mut fetched = 0;
    for (name, work) in rows {
        let t = Instant::now();
        let storage = Arc::new(RemoteStorage::open(&url).map_err(|e| vds::Error::io(format!("opening {url}"), e))?);
        let ds = vds::remote::open_storage(&storage, &vds::OpenOptions::new())?;
        work(&ds)?;
        let took = t.elapsed();
        let s = storage.stats();
        fetched = s.bytes;
        println!(
            "| {name} | {:.0} ms | {} | {} | {:.2} |",
            took.as_secs_f64() * 1e3,
            s.requests,
            s.round_trips,
            s.bytes as f64 / (1 << 20) as f64
        );
    }
    // The floor: the whole-volume read's byte count from the start of the
    // object, as its requests fetch (ranges of MERGE_MAX, CONCURRENCY in
    // flight), nothing decoded.
    let t = Instant::now();
    let storage = RemoteStorage::open(&url).map_err(|e| vds::Error::io(format!("opening {url}"), e))?;
    let piece = vds::remote::MERGE_MAX as usize;
    let mut bytes = vec![0u8; fetched.min(size) as usize];
    let mut reads: Vec<(u64, &mut [u8])> = bytes.chunks_mut(piece).enumerate().map(|(k, b)| ((k * piece) as u64, b)).collect();
    vds::Storage::read_many(&storage, &mut reads).map_err(|e| vds::Error::io(format!("fetching {url}"), e))?;
    let s = storage.stats();
    println!(
        "| as many bytes, nothing decoded (the floor) | {:.0} ms | {} | {} | {:.2} |",
        t.elapsed().as_secs_f64() * 1e3,
        s.requests,
        s.round_trips,
        s.bytes as f64 / (1 << 20) as f64
    );
    Ok(())
}

/// A smooth signal, about as compressible as seismic amplitudes.
fn signal(i: u64, j: u64, k: u64) -> f32 {
    let (i, j, k) = (i as f32, j as f32, k as f32);
    (k * 0.09 + (i * 0.02).sin() * 3.0 + (j * 0.015).cos() * 2.0).sin() * (1.0 + 0.001 * (i + j))
}
