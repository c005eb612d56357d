//! The body of the `segy` fuzz target (fuzz/fuzz_targets/segy.rs), kept in
//! the crate so that `cargo test` replays the corpus through exactly the
//! code the fuzzer ran. Not part of the API.

use crate::{Geometry, KeyBytes, SegyFile};

/// Opens `data` as a SEG-Y file, works out its geometry with the default
/// and the pre-stack keys, and reads every sample. Must never panic, hang
/// or allocate without bound.
pub fn parse(data: &[u8]) {
    let Ok(file) = SegyFile::open(data) else { return };
    let _ = file.text();
    let _ = file.binary.fields();
    for keys in [KeyBytes::default(), KeyBytes { offset: Some(37), ..KeyBytes::default() }, KeyBytes { two_d: true, ..KeyBytes::default() }]
    {
        let _ = Geometry::scan(&file, keys, &mut |_| true);
    }
    let native = file.format().native_size();
    let Ok(samples) = usize::try_from(file.samples) else { return };
    let Some(bytes) = samples.checked_mul(native) else { return };
    // The whole trace is in `data`, so its decoded size is bounded by it.
    if bytes > data.len() * 8 {
        return;
    }
    let (mut dst, mut scratch) = (vec![0u8; bytes], Vec::new());
    for i in 0..file.traces {
        file.read_samples(i, 0, &mut dst, &mut scratch).expect("a located trace must be readable");
    }
}
