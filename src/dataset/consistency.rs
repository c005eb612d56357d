//! The full check of [`Dataset::verify_full`]: every level of detail and
//! every partitioning of a variable holds what level 0 of its first
//! partitioning implies (SPEC.md 3.7 and 7.7).
//!
//! The other layers are copies and reductions of that one, brought up to
//! date at each commit. Checksums cannot tell when a layer was written
//! from other data (a tile layer holding zeros where the bricks hold
//! values is made of intact chunks), and a read that picks that layer
//! would return it; so this check recomputes each layer chunk that can
//! differ from the fill value — one with an index entry, or one covering
//! a chunk of the layer it is computed from that has one — and compares
//! it with what a read of that layer returns. Everything else is fill in
//! both. Time is proportional to the stored data of every layer.

use super::layers::{chunk_bounds, chunks_touching, halve, region_bytes, Bounds};
use super::Dataset;
use crate::array::{Order, Region};
use crate::error::{Error, ErrorKind, Result};
use crate::index::{Entry, Key};
use crate::spec::{Compression, DType, Variable, MASK_LAYER};
use std::collections::BTreeSet;

impl Dataset {
    /// Compares every level of detail and partitioning (and their masks)
    /// of every variable with what level 0 of its first partitioning
    /// implies, calling `note` with each chunk that disagrees. `entries` is
    /// the index of the commit.
    ///
    /// # Errors
    /// Failures that stop the check (a chunk that cannot be read; such
    /// damage is also what the per-chunk checks report).
    pub(super) fn check_layers(&self, entries: &[(Key, Entry)], note: &mut dyn FnMut(Error)) -> Result<()> {
        for var in &self.vars {
            if var.lods == 1 && var.parts.len() == 1 {
                continue;
            }
            // The chunk coordinates of each stored layer's entries, by layer id.
            let stored = |lod: u8, part: u8| -> BTreeSet<Vec<u64>> {
                let id = (var.index as u32) << 16 | u32::from(lod) << 8 | u32::from(part);
                let n = var.stored_layer(lod, part).map_or(0, |l| l.grid.len());
                entries.iter().filter(|(k, _)| k.layer == id).map(|(k, _)| k.coords[..n].iter().map(|&c| u64::from(c)).collect()).collect()
            };
            let with_mask = |lod: u8, part: u8| -> BTreeSet<Vec<u64>> {
                let mut s = stored(lod, part);
                s.extend(stored(lod, part | MASK_LAYER));
                s
            };
            let missing = || Error::new(ErrorKind::Internal, "layer missing");
            let mut boxes: Vec<Bounds> = {
                let base = var.layer(0, 0).ok_or_else(missing)?;
                with_mask(0, 0).iter().map(|c| chunk_bounds(base, c)).collect()
            };
            for lod in 0..var.lods {
                let base = var.layer(lod, 0).ok_or_else(missing)?;
                if lod > 0 {
                    let mut targets = chunks_touching(base, &halve(var, &boxes));
                    targets.extend(with_mask(lod, 0));
                    for c in &targets {
                        let (region, want, want_mask) = self.lod_chunk(var, lod, c)?;
                        let what = || format!("level of detail {lod} of variable {:?}, chunk {c:?}", var.name);
                        let from = format!("level {} computed from level {}", lod, lod - 1);
                        self.compare(base, &region, &want, &what(), &from, note)?;
                        if let (Some(m), Some(bits)) = (var.stored_layer(lod, MASK_LAYER), want_mask) {
                            self.compare(m, &region, &bits, &format!("the mask of {}", what()), &from, note)?;
                        }
                    }
                    boxes = targets.iter().map(|c| chunk_bounds(base, c)).collect();
                }
                for p in 1..var.parts.len() as u8 {
                    let layer = var.layer(lod, p).ok_or_else(missing)?;
                    let mut targets = chunks_touching(layer, &boxes);
                    targets.extend(with_mask(lod, p));
                    for c in &targets {
                        let (s, e) = chunk_bounds(layer, c);
                        let shape: Vec<u64> = s.iter().zip(&e).map(|(a, b)| b - a).collect();
                        let region = Region::new(&s, &shape)?;
                        let what = || format!("partitioning {p} ({}) of variable {:?}, chunk {c:?}", layer.name, var.name);
                        let from = format!("partitioning 0 at level {lod}");
                        let mut want = Vec::new();
                        self.reserve(&mut want, region_bytes(base, &shape)?, "a region of partitioning 0")?;
                        self.read_layer(base, &region, Order::C, &mut want)?;
                        self.compare(layer, &region, &want, &what(), &from, note)?;
                        if let (Some(from_mask), Some(to_mask)) = (var.stored_layer(lod, MASK_LAYER), var.stored_layer(lod, MASK_LAYER | p))
                        {
                            let mut bits = Vec::new();
                            self.reserve(&mut bits, region_bytes(from_mask, &shape)?, "a mask region of partitioning 0")?;
                            self.read_layer(from_mask, &region, Order::C, &mut bits)?;
                            self.compare(to_mask, &region, &bits, &format!("the mask of {}", what()), &from, note)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Reads `region` of `layer` and notes a disagreement with `want`.
    fn compare(&self, layer: &Variable, region: &Region, want: &[u8], what: &str, from: &str, note: &mut dyn FnMut(Error)) -> Result<()> {
        let mut got = Vec::new();
        self.reserve(&mut got, want.len(), what)?;
        self.read_layer(layer, region, Order::C, &mut got)?;
        let first = match lossy_slack(layer) {
            None => got.iter().zip(want).position(|(a, b)| a != b).map(|i| i / layer.esize().max(1)),
            Some(slack) => first_beyond(layer.dtype, &got, want, slack),
        };
        if let Some(element) = first {
            let at: Vec<u64> = {
                let mut rest = element as u64;
                let mut idx = vec![0; region.ndim()];
                for d in (0..region.ndim()).rev() {
                    idx[d] = region.start()[d] + rest % region.shape()[d];
                    rest /= region.shape()[d];
                }
                idx
            };
            note(Error::new(
                ErrorKind::Corrupt,
                format!("{what} disagrees with {from}: first at element {at:?} of the layer (stored bytes intact, contents inconsistent)"),
            ));
        }
        Ok(())
    }
}

/// How far a value of a lossy layer may lie from what the layer it is
/// computed from implies: a bounded layer (SPEC.md 6.6) and that layer were
/// each stored within the codec's tolerance of the values they were given,
/// so twice the tolerance. None: the layer is lossless and must match bit
/// for bit.
fn lossy_slack(layer: &Variable) -> Option<f64> {
    match layer.codec.compression {
        Compression::Bounded { tolerance, .. } if matches!(layer.dtype, DType::Float32 | DType::Float64) => Some(2.0 * tolerance),
        _ => None,
    }
}

/// The first element of `got` (float32 or float64 values in memory order)
/// farther than `slack` from `want`'s, beyond the rounding of the average
/// that computed it. Equal bits, and NaN against NaN, agree.
// The memory form is native-endian: elements are read as such.
#[allow(clippy::host_endian_bytes)]
fn first_beyond(dtype: DType, got: &[u8], want: &[u8], slack: f64) -> Option<usize> {
    let close = |a: f64, b: f64, eps: f64| {
        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()) || (a - b).abs() <= slack + 4.0 * eps * a.abs().max(b.abs())
    };
    if dtype == DType::Float32 {
        let f = |c: &[u8]| f64::from(f32::from_ne_bytes([c[0], c[1], c[2], c[3]]));
        got.chunks_exact(4).zip(want.chunks_exact(4)).position(|(a, b)| !close(f(a), f(b), f64::from(f32::EPSILON)))
    } else {
        let f = |c: &[u8]| f64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        got.chunks_exact(8).zip(want.chunks_exact(8)).position(|(a, b)| !close(f(a), f(b), f64::EPSILON))
    }
}

#[cfg(test)]
mod tests {
    use crate::{Axis, DType, Dataset, DatasetBuilder, LodMethod, MemoryStorage, Order, Region, VariableBuilder};
    use std::sync::Arc;

    /// A 32^3 ramp in 16^3 bricks, with tiles across the first two axes and
    /// two levels of detail.
    fn layered() -> (Dataset, Vec<f32>) {
        let mut ds = DatasetBuilder::new()
            .axis(Axis::new("x", 32))
            .axis(Axis::new("y", 32))
            .axis(Axis::new("z", 32))
            .variable(
                VariableBuilder::new("v", DType::Float32, &["x", "y", "z"])
                    .chunk(&[16, 16, 16])
                    .partitioning(&[32, 32, 1])
                    .levels_of_detail(2, &["x", "y", "z"], LodMethod::Average),
            )
            .create_in(Arc::new(MemoryStorage::new()))
            .unwrap();
        let data: Vec<f32> = (0..32 * 32 * 32).map(|i| i as f32 * 0.5).collect();
        ds.write("v", &Region::full(&[32, 32, 32]).unwrap(), Order::C, &data).unwrap();
        ds.commit().unwrap();
        (ds, data)
    }

    #[test]
    fn consistent_layers_pass_the_full_check() {
        let (ds, _) = layered();
        let report = ds.verify_full().unwrap();
        assert!(report.is_ok(), "{:?}", report.problems);
    }

    #[test]
    fn a_tile_layer_holding_other_values_is_reported() {
        let (mut ds, data) = layered();
        // Zeros written into the tiles of plane z = 5 only, committed without
        // touching level 0: every chunk is intact.
        let tiles = ds.vars[0].layer(0, 1).unwrap().clone();
        let plane = Region::new(&[0, 0, 5], &[32, 32, 1]).unwrap();
        ds.write_layer(&tiles, &plane, Order::C, &[0u8; 32 * 32 * 4]).unwrap();
        ds.commit().unwrap();
        assert!(ds.verify().unwrap().is_ok(), "the chunks themselves are intact");
        // A read that picks the tiles returns the zeros: what the check is for.
        let got: Vec<f32> = ds.read_vec("v", &plane, Order::C).unwrap();
        assert_ne!(got, (0..32 * 32).map(|i| data[i * 32 + 5]).collect::<Vec<_>>());
        let report = ds.verify_full().unwrap();
        assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
        let text = report.problems[0].to_string();
        assert!(text.contains("partitioning 1") && text.contains("chunk [0, 0, 5]") && text.contains("[0, 0, 5]"), "{text}");
    }

    /// A bounded variable's levels of detail and tiles are stored lossily
    /// too (SPEC.md 6.6): they agree with level 0 within the codec's bound,
    /// not bit for bit, and pass; a value beyond it is still reported.
    #[cfg(feature = "zstd")]
    #[test]
    fn lossy_layers_pass_within_their_bound() {
        use crate::Codec;
        let tolerance = 0.01;
        let mut ds = DatasetBuilder::new()
            .axis(Axis::new("x", 32))
            .axis(Axis::new("y", 32))
            .axis(Axis::new("z", 32))
            .variable(
                VariableBuilder::new("v", DType::Float32, &["x", "y", "z"])
                    .chunk(&[16, 16, 16])
                    .codec(Codec::bounded(tolerance))
                    .partitioning(&[32, 32, 1])
                    .levels_of_detail(3, &["x", "y", "z"], LodMethod::Average),
            )
            .create_in(Arc::new(MemoryStorage::new()))
            .unwrap();
        let data: Vec<f32> = (0..32 * 32 * 32).map(|i| ((i as f32) * 0.37).sin() * 3.0).collect();
        ds.write("v", &Region::full(&[32, 32, 32]).unwrap(), Order::C, &data).unwrap();
        ds.commit().unwrap();
        let lod1 = ds.vars[0].layer(1, 0).unwrap().clone();
        let mut lossy = vec![0f32; 16 * 16 * 16];
        ds.read_layer(&lod1, &Region::full(&[16, 16, 16]).unwrap(), Order::C, crate::array::as_bytes_mut(&mut lossy)).unwrap();
        // The exact averages of each 2x2x2 box of what was written: level 1 is within twice the bound of them, not equal.
        let at = |x: usize, y: usize, z: usize| f64::from(data[(x * 32 + y) * 32 + z]);
        let mut off = 0.0f64;
        for (i, &v) in lossy.iter().enumerate() {
            let (x, y, z) = (2 * (i / 256), 2 * (i / 16 % 16), 2 * (i % 16));
            let mean = (0..8).map(|k| at(x + (k >> 2), y + (k >> 1 & 1), z + (k & 1))).sum::<f64>() / 8.0;
            off = off.max((f64::from(v) - mean).abs());
        }
        assert!(off > 0.0 && off <= 2.0 * tolerance + 1e-6, "level 1 lies {off} from the exact averages");
        let report = ds.verify_full().unwrap();
        assert!(report.is_ok(), "{:?}", report.problems);

        ds.write_layer(
            &lod1,
            &Region::new(&[3, 4, 5], &[1, 1, 1]).unwrap(),
            Order::C,
            crate::array::as_bytes(&[lossy[3 * 256 + 4 * 16 + 5] + 0.05]),
        )
        .unwrap();
        ds.commit().unwrap();
        let report = ds.verify_full().unwrap();
        assert!(
            report.problems.iter().any(|e| e.to_string().contains("level of detail 1") && e.to_string().contains("[3, 4, 5]")),
            "{:?}",
            report.problems
        );
    }

    #[test]
    fn a_level_of_detail_holding_other_values_is_reported() {
        let (mut ds, _) = layered();
        let lod1 = ds.vars[0].layer(1, 0).unwrap().clone();
        ds.write_layer(&lod1, &Region::new(&[8, 0, 0], &[1, 1, 1]).unwrap(), Order::C, crate::array::as_bytes(&[7.0f32])).unwrap();
        ds.commit().unwrap();
        assert!(ds.verify().unwrap().is_ok());
        let report = ds.verify_full().unwrap();
        assert!(!report.is_ok());
        assert!(
            report.problems.iter().any(|e| e.to_string().contains("level of detail 1") && e.to_string().contains("[8, 0, 0]")),
            "{:?}",
            report.problems
        );
    }
}
