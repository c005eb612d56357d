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
#[cfg(feature = "zstd")]
use crate::codec::bounded::within;
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
        for var in self.vars.iter() {
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
                        self.compare(base, &region, &want, lod_tolerance(base), &what(), &from, note)?;
                        if let (Some(m), Some(bits)) = (var.stored_layer(lod, MASK_LAYER), want_mask) {
                            self.compare(m, &region, &bits, None, &format!("the mask of {}", what()), &from, note)?;
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
                        self.compare(layer, &region, &want, None, &what(), &from, note)?;
                        if let (Some(from_mask), Some(to_mask)) = (var.stored_layer(lod, MASK_LAYER), var.stored_layer(lod, MASK_LAYER | p))
                        {
                            let mut bits = Vec::new();
                            self.reserve(&mut bits, region_bytes(from_mask, &shape)?, "a mask region of partitioning 0")?;
                            self.read_layer(from_mask, &region, Order::C, &mut bits)?;
                            self.compare(to_mask, &region, &bits, None, &format!("the mask of {}", what()), &from, note)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Reads `region` of `layer` and notes a disagreement with `want`: a
    /// byte that differs, or with a `tolerance`, a value farther than it.
    #[allow(clippy::too_many_arguments)]
    fn compare(
        &self,
        layer: &Variable,
        region: &Region,
        want: &[u8],
        tolerance: Option<f64>,
        what: &str,
        from: &str,
        note: &mut dyn FnMut(Error),
    ) -> Result<()> {
        let mut got = Vec::new();
        self.reserve(&mut got, want.len(), what)?;
        self.read_layer(layer, region, Order::C, &mut got)?;
        let first = match tolerance {
            #[cfg(feature = "zstd")]
            Some(t) => first_beyond(layer.dtype, &got, want, t),
            _ => got.iter().zip(want).position(|(a, b)| a != b).map(|i| i / layer.esize().max(1)),
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

/// How far a value of a level of detail may lie from the one computed
/// from the level below: a level of a bounded variable is computed from
/// the level below as read and stored with the codec (SPEC.md 6.6), so
/// within its tolerance, as the codec itself checks it. None (bit for
/// bit) for any other codec. Partitionings are copies stored losslessly
/// and get no tolerance.
fn lod_tolerance(layer: &Variable) -> Option<f64> {
    // Without zstd no bounded chunk is read at all.
    match layer.codec.compression {
        Compression::Bounded { tolerance, .. } if matches!(layer.dtype, DType::Float32 | DType::Float64) => Some(tolerance),
        _ => None,
    }
}

/// The first element of `got` (float32 or float64 values in memory order)
/// neither bit for bit equal to `want`'s nor within `tolerance` of it.
// The memory form is native-endian: elements are read as such.
#[cfg(feature = "zstd")]
#[allow(clippy::host_endian_bytes)]
fn first_beyond(dtype: DType, got: &[u8], want: &[u8], tolerance: f64) -> Option<usize> {
    let agree = |a: f64, b: f64, same: bool| same || within(a, b, tolerance);
    if dtype == DType::Float32 {
        let f = |c: &[u8]| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]);
        got.chunks_exact(4).zip(want.chunks_exact(4)).position(|(a, b)| !agree(f64::from(f(a)), f64::from(f(b)), a == b))
    } else {
        let f = |c: &[u8]| f64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        got.chunks_exact(8).zip(want.chunks_exact(8)).position(|(a, b)| !agree(f(a), f(b), a == b))
    }
}

#[cfg(test)]
mod tests {
    use crate::{Axis, DType, Dataset, DatasetBuilder, LodMethod, MemoryStorage, Order, Region, VariableBuilder};
    use std::sync::Arc;

    /// `data` (32^3 values) in 16^3 bricks of `codec`, with tiles across the
    /// first two axes and `levels` levels of detail, committed.
    fn layered_with(codec: crate::Codec, levels: u8, data: &[f32]) -> Dataset {
        let mut ds = DatasetBuilder::new()
            .axis(Axis::new("x", 32))
            .axis(Axis::new("y", 32))
            .axis(Axis::new("z", 32))
            .variable(
                VariableBuilder::new("v", DType::Float32, &["x", "y", "z"])
                    .chunk(&[16, 16, 16])
                    .codec(codec)
                    .partitioning(&[32, 32, 1])
                    .levels_of_detail(levels, &["x", "y", "z"], LodMethod::Average),
            )
            .create_in(Arc::new(MemoryStorage::new()))
            .unwrap();
        ds.write("v", &Region::full(&[32, 32, 32]).unwrap(), Order::C, data).unwrap();
        ds.commit().unwrap();
        ds
    }

    /// A 32^3 ramp, uncompressed, with tiles and two levels of detail.
    fn layered() -> (Dataset, Vec<f32>) {
        let data: Vec<f32> = (0..32 * 32 * 32).map(|i| i as f32 * 0.5).collect();
        (layered_with(crate::Codec::NONE, 2, &data), data)
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

    /// A bounded variable's levels of detail are computed from the level
    /// below as read and stored lossily (SPEC.md 6.6): they agree with it
    /// within the codec's tolerance, not bit for bit, and pass; a value
    /// beyond the tolerance is reported, and so is a tile (a lossless copy)
    /// off by less than it.
    #[cfg(feature = "zstd")]
    #[test]
    fn lossy_levels_pass_within_their_bound_and_tiles_bit_for_bit() {
        let t = 0.01;
        let data: Vec<f32> = (0..32 * 32 * 32).map(|i| ((i as f32) * 0.37).sin() * 3.0).collect();
        let mut ds = layered_with(crate::Codec::bounded(t), 3, &data);
        let read = |ds: &Dataset, layer: &crate::spec::Variable, start: &[u64], shape: &[u64]| {
            let mut out = vec![0f32; shape.iter().product::<u64>() as usize];
            ds.read_layer(layer, &Region::new(start, shape).unwrap(), Order::C, crate::array::as_bytes_mut(&mut out)).unwrap();
            out
        };
        let (lod1, tiles) = (ds.vars[0].layer(1, 0).unwrap().clone(), ds.vars[0].layer(0, 1).unwrap().clone());
        let level0: Vec<f32> = ds.read_vec("v", &Region::full(&[32, 32, 32]).unwrap(), Order::C).unwrap();
        let stored = read(&ds, &lod1, &[0, 0, 0], &[16, 16, 16]);
        // The averages of each 2x2x2 box of level 0 as read: level 1 lies within t of them, not on them.
        let at = |x: usize, y: usize, z: usize| f64::from(level0[(x * 32 + y) * 32 + z]);
        let mean = |i: usize| {
            let (x, y, z) = (2 * (i / 256), 2 * (i / 16 % 16), 2 * (i % 16));
            (0..8).map(|k| at(x + (k >> 2), y + (k >> 1 & 1), z + (k & 1))).sum::<f64>() / 8.0
        };
        let off = stored.iter().enumerate().map(|(i, &v)| (f64::from(v) - mean(i)).abs()).fold(0.0, f64::max);
        assert!(off > 0.0 && off <= t * 1.000_001, "level 1 lies {off} from the averages of level 0");
        let report = ds.verify_full().unwrap();
        assert!(report.is_ok(), "{:?}", report.problems);

        // One level-1 value 1.5 t from its average (within twice the tolerance, beyond it).
        let i = 3 * 256 + 4 * 16 + 5;
        ds.write_layer(
            &lod1,
            &Region::new(&[3, 4, 5], &[1, 1, 1]).unwrap(),
            Order::C,
            crate::array::as_bytes(&[(mean(i) + 1.5 * t) as f32]),
        )
        .unwrap();
        // One tile value off by a tenth of the tolerance.
        let v = read(&ds, &tiles, &[7, 8, 9], &[1, 1, 1])[0];
        ds.write_layer(&tiles, &Region::new(&[7, 8, 9], &[1, 1, 1]).unwrap(), Order::C, crate::array::as_bytes(&[v + 0.1 * t as f32]))
            .unwrap();
        ds.commit().unwrap();
        let report = ds.verify_full().unwrap();
        let texts: Vec<String> = report.problems.iter().map(ToString::to_string).collect();
        assert!(texts.iter().any(|e| e.contains("level of detail 1") && e.contains("[3, 4, 5]")), "{texts:?}");
        assert!(texts.iter().any(|e| e.contains("partitioning 1") && e.contains("[7, 8, 9]")), "{texts:?}");
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
