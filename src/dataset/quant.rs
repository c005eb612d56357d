//! Quantized variables (SPEC.md 3.8): conversions between a float
//! variable's values and its stored integers, in native byte order.

use crate::spec::{DType, Quantization};

/// The stored integers (`q.storage`, native order) of `values` (`dtype`, native order).
// Buffers in memory are in native byte order; files never see these bytes.
#[allow(clippy::host_endian_bytes)]
pub(super) fn to_integers(q: &Quantization, dtype: DType, values: &[u8], out: &mut [u8]) {
    let esize = dtype.size();
    for (i, v) in values.chunks_exact(esize).enumerate() {
        let x = if dtype == DType::Float32 {
            f64::from(f32::from_ne_bytes([v[0], v[1], v[2], v[3]]))
        } else {
            f64::from_ne_bytes([v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]])
        };
        let n = q.quantize(x);
        if q.storage == DType::UInt8 {
            out[i] = n as u8;
        } else {
            out[2 * i..2 * i + 2].copy_from_slice(&n.to_ne_bytes());
        }
    }
}

/// The values (`dtype`, native order) that stored integers stand for.
#[allow(clippy::host_endian_bytes)]
pub(super) fn to_values(q: &Quantization, dtype: DType, ints: &[u8], out: &mut [u8]) {
    let isize = q.storage.size();
    let esize = dtype.size();
    for (i, b) in ints.chunks_exact(isize).enumerate() {
        let n = if isize == 1 { u16::from(b[0]) } else { u16::from_ne_bytes([b[0], b[1]]) };
        let x = q.value(n);
        let dst = &mut out[i * esize..(i + 1) * esize];
        if dtype == DType::Float32 {
            dst.copy_from_slice(&(x as f32).to_ne_bytes());
        } else {
            dst.copy_from_slice(&x.to_ne_bytes());
        }
    }
}
