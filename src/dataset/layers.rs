//! Levels of detail and partitionings (SPEC.md section 3.3): which stored
//! layer a read goes to, reading a level or a slice, and bringing every
//! layer up to date from level 0 of the first partitioning at commit.

use super::plan::{chunk_key, cores, fill_chunk, for_each_chunk, pipeline, valid_part, Buffers, PARALLEL_MIN_BYTES};
use super::write::{gather, prepare, Prepared};
use super::{Dataset, VarRef};
use crate::array::{as_bytes, as_bytes_mut, copy_block, strides, Element, Order, Region, Span};
use crate::error::{invalid, Error, ErrorKind, Result};
use crate::spec::{DType, LodMethod, Variable, MASK_LAYER};
use crate::wire;
use std::collections::BTreeSet;

/// A chunk of a level of detail made ready to store: prepared, the chunk
/// in memory form it was prepared from (an uncompressed one points into
/// it), its region and, with a mask, the mask's bits.
type LevelChunk = (Prepared, Vec<u8>, Region, Option<Vec<u8>>);

/// Most written regions remembered for the layers' update at commit.
const MAX_DIRTY: usize = 4096;

/// A box of elements: start and end (exclusive) per axis.
pub(crate) type Bounds = (Vec<u64>, Vec<u64>);

/// The boxes of the next level of detail of `var` that cover `boxes` of a level.
pub(super) fn halve(var: &Variable, boxes: &[Bounds]) -> Vec<Bounds> {
    let h = |x: &[u64], up: bool| -> Vec<u64> {
        x.iter()
            .zip(&var.lod_axes)
            .map(|(&x, &h)| {
                if !h {
                    x
                } else if up {
                    x.div_ceil(2)
                } else {
                    x / 2
                }
            })
            .collect()
    };
    boxes.iter().map(|(s, e)| (h(s, false), h(e, true))).collect()
}

impl Dataset {
    /// The stored layer a read of `region` (in the coordinates of level
    /// `lod`) goes to: partitioning `part` when given, otherwise the one
    /// whose chunks covering the region hold the fewest bytes (the first
    /// on a tie, and always the first while writes wait for their commit).
    pub(crate) fn choose_layer(&self, v: usize, lod: u8, part: Option<u8>, region: &Region) -> Result<&Variable> {
        let var = &self.vars[v];
        if lod >= var.lods {
            return Err(Error::new(
                ErrorKind::OutOfRange,
                format!("variable {:?} has {} level(s) of detail; level {lod} does not exist", var.name, var.lods),
            ));
        }
        if let Some(p) = part {
            return var.layer(lod, p).ok_or_else(|| {
                Error::new(
                    ErrorKind::OutOfRange,
                    format!("variable {:?} has {} partitioning(s); {p} does not exist", var.name, var.parts.len()),
                )
            });
        }
        let first = var.layer(lod, 0).ok_or_else(|| Error::new(ErrorKind::Internal, "layer 0 missing"))?;
        if var.parts.len() == 1 || self.dirty.iter().any(|(d, _)| *d == v) || region.ndim() != var.shape.len() {
            return Ok(first);
        }
        let cost = |l: &Variable| -> u128 {
            let chunks: u128 = (0..l.shape.len())
                .map(|d| {
                    let (s, n, st) = (region.start()[d], region.shape()[d], region.step()[d]);
                    if n == 0 {
                        return 0;
                    }
                    let last = s.saturating_add((n - 1).saturating_mul(st));
                    u128::from(last / l.chunk[d] - s / l.chunk[d] + 1)
                })
                .product();
            chunks * l.chunk_elems as u128
        };
        let mut best = first;
        for p in 1..var.parts.len() {
            if let Some(l) = var.layer(lod, p as u8) {
                if cost(l) < cost(best) {
                    best = l;
                }
            }
        }
        Ok(best)
    }

    /// Notes that `region` of level 0 changed, so that the other layers of
    /// the variable are brought up to date at commit.
    pub(crate) fn mark_dirty(&mut self, v: usize, region: &Region) {
        let var = &self.vars[v];
        if var.layers.len() < 2 || region.shape().contains(&0) {
            return;
        }
        let start = region.start().to_vec();
        let end: Vec<u64> = (0..start.len()).map(|d| start[d] + (region.shape()[d] - 1) * region.step()[d] + 1).collect();
        // A region inside the one noted last adds nothing (repeated small writes).
        if let Some((w, (s, e))) = self.dirty.last() {
            if *w == v && s.iter().zip(&start).all(|(a, b)| a <= b) && e.iter().zip(&end).all(|(a, b)| a >= b) {
                return;
            }
        }
        self.dirty.push((v, (start, end)));
        // Bounded: past MAX_DIRTY regions, each variable's collapse into their bounding box.
        if self.dirty.len() > MAX_DIRTY {
            let mut merged: Vec<(usize, Bounds)> = Vec::new();
            for (w, (s, e)) in std::mem::take(&mut self.dirty) {
                match merged.iter_mut().find(|(x, _)| *x == w) {
                    Some((_, (ms, me))) => {
                        ms.iter_mut().zip(&s).for_each(|(a, b)| *a = (*a).min(*b));
                        me.iter_mut().zip(&e).for_each(|(a, b)| *a = (*a).max(*b));
                    }
                    None => merged.push((w, (s, e))),
                }
            }
            self.dirty = merged;
        }
    }

    /// Computes the levels of detail and the other partitionings of every
    /// region written since the last commit. [`Dataset::commit`] does this
    /// first; call it to read those layers before committing.
    ///
    /// # Errors
    /// As [`Dataset::write`].
    pub fn update_layers(&mut self) -> Result<()> {
        self.check_writable()?;
        self.flush_held()?;
        let dirty = std::mem::take(&mut self.dirty);
        let mut vars: Vec<usize> = dirty.iter().map(|(v, _)| *v).collect();
        vars.sort_unstable();
        vars.dedup();
        for v in vars {
            let boxes: Vec<Bounds> = dirty.iter().filter(|(w, _)| *w == v).map(|(_, b)| b.clone()).collect();
            if let Err(e) = self.update_variable(v, boxes) {
                if e.kind() == ErrorKind::Io {
                    self.poisoned = true;
                }
                // Nothing is forgotten: a later commit redoes the whole update.
                self.dirty = dirty;
                return Err(e);
            }
        }
        Ok(())
    }

    fn update_variable(&mut self, v: usize, mut boxes: Vec<Bounds>) -> Result<()> {
        // A handle on the variables (not a copy): updating takes `&mut self`.
        let vars = self.vars.clone();
        let var = &vars[v];
        for lod in 0..var.lods {
            let base = var.layer(lod, 0).ok_or_else(|| Error::new(ErrorKind::Internal, "layer missing"))?;
            if lod > 0 {
                // This level's samples covering the changed boxes of the level below.
                let halved = halve(var, &boxes);
                let targets = chunks_touching(base, &halved);
                self.build_level(var, lod, &targets)?;
                boxes = targets.iter().map(|c| chunk_bounds(base, c)).collect();
            }
            // The other partitionings of this level, from the first.
            // One buffer serves every block of every partitioning.
            let mut buf = Vec::new();
            for p in 1..var.parts.len() {
                let layer = var.layer(lod, p as u8).ok_or_else(|| Error::new(ErrorKind::Internal, "layer missing"))?;
                let regions = self.partition_regions(base, layer, &chunks_touching(layer, &boxes));
                for block in regions {
                    self.copy_block(base, layer, &block, &mut buf)?;
                    // The mask goes with the values.
                    if let (Some(from), Some(to)) = (var.stored_layer(lod, MASK_LAYER), var.stored_layer(lod, MASK_LAYER | p as u8)) {
                        self.copy_block(from, to, &block, &mut buf)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Brings chunks `targets` of level `lod` (> 0) of `var` up to date
    /// from the level below ([`Dataset::lod_chunk`]). Without margins, and
    /// with enough to do, a batch of chunks at a time is computed and
    /// encoded on several cores and then stored in order: the same bytes,
    /// in the same order, as storing them one by one. (With margins each
    /// chunk also feeds its neighbours' margins: one by one.)
    fn build_level(&mut self, var: &Variable, lod: u8, targets: &BTreeSet<Vec<u64>>) -> Result<()> {
        let base = var.layer(lod, 0).ok_or_else(|| Error::new(ErrorKind::Internal, "layer missing"))?;
        let mask = var.stored_layer(lod, MASK_LAYER);
        let targets: Vec<&Vec<u64>> = targets.iter().collect();
        let tbytes = base.chunk_elems * base.esize();
        let workers = if base.margin != [0, 0] || targets.len() * tbytes < PARALLEL_MIN_BYTES { 1 } else { cores().min(targets.len()) };
        if workers < 2 {
            for c in targets {
                let (region, out, out_mask) = self.lod_chunk(var, lod, c)?;
                self.write_layer(base, &region, Order::C, &out)?;
                if let (Some(m), Some(bits)) = (mask, out_mask) {
                    self.write_layer(m, &region, Order::C, &bits)?;
                }
            }
            return Ok(());
        }
        // A batch's results hold each chunk twice (values and encoded): within a quarter of the
        // memory limit. Each worker also holds, while it averages, the chunks of the level below
        // its chunk covers (up to 2^axes of them), as the one-core path does one at a time.
        let fit = usize::try_from(self.memory_limit / 4).unwrap_or(usize::MAX) / (2 * tbytes).max(1);
        let batch = (4 * workers).min(fit).max(1);
        for part in targets.chunks(batch) {
            let mut done: Vec<Option<LevelChunk>> = (0..part.len()).map(|_| None).collect();
            let this = &*self;
            pipeline(
                part.len(),
                workers,
                || (),
                |(), i| {
                    let (region, out, out_mask) = this.lod_chunk(var, lod, part[i])?;
                    // As a write of the chunk's region makes it: the fill value beyond the extent.
                    let mut chunk = Vec::new();
                    this.reserve(&mut chunk, tbytes, "a chunk of a level of detail")?;
                    fill_chunk(base, &base.fill, &mut chunk);
                    for_each_chunk(base, &region, Order::C, true, |_, plan| {
                        gather(base, plan, &out, &mut chunk);
                        Ok(())
                    })?;
                    // Stored as write_layer stores a whole chunk (lossily for a bounded variable: new values).
                    let decoded = this.writing_decoded && base.is_bounded();
                    Ok((prepare(base, part[i], &chunk, decoded), chunk, region, out_mask))
                },
                |i, r| {
                    done[i] = Some(r);
                    Ok(())
                },
            )?;
            for (c, r) in part.iter().zip(done) {
                let (prepared, chunk, region, out_mask) =
                    r.ok_or_else(|| Error::new(ErrorKind::Internal, "a level chunk was not computed"))?;
                let key = chunk_key(base, c);
                self.unhold(&key);
                self.store_chunk(base, key, prepared, &chunk)?;
                if let (Some(m), Some(bits)) = (mask, out_mask) {
                    self.write_layer(m, &region, Order::C, &bits)?;
                }
            }
        }
        Ok(())
    }

    /// The contents level `lod` (> 0) of `var` must have in its chunk `c`,
    /// computed from level `lod - 1` as the commit computes it: the chunk's
    /// region (clipped to the level's extent), its values in the layers'
    /// type, and its missing-value mask when the variable keeps one.
    pub(super) fn lod_chunk(&self, var: &Variable, lod: u8, c: &[u64]) -> Result<(Region, Vec<u8>, Option<Vec<u8>>)> {
        let missing = || Error::new(ErrorKind::Internal, "layer missing");
        let base = var.layer(lod, 0).ok_or_else(missing)?;
        let below = var.layer(lod - 1, 0).ok_or_else(missing)?;
        let (s, e) = chunk_bounds(base, c);
        let src_s: Vec<u64> = s.iter().zip(&var.lod_axes).map(|(&x, &h)| if h { 2 * x } else { x }).collect();
        let src_e: Vec<u64> =
            e.iter().zip(&var.lod_axes).zip(&below.shape).map(|((&x, &h), &n)| if h { (2 * x).min(n) } else { x }).collect();
        let src_shape: Vec<u64> = src_s.iter().zip(&src_e).map(|(a, b)| b - a).collect();
        let mut src = Vec::new();
        self.reserve(&mut src, region_bytes(below, &src_shape)?, "a level-of-detail source region")?;
        self.read_layer(below, &Region::new(&src_s, &src_shape)?, Order::C, &mut src)?;
        // The layers' own type: a quantized variable's stored integers.
        let nv = below.no_value.map(|mut e| {
            crate::codec::le_to_native(&mut e[..below.esize()], below.esize());
            e
        });
        let src_mask = match var.stored_layer(lod - 1, MASK_LAYER) {
            Some(m) => {
                let mut bits = Vec::new();
                self.reserve(&mut bits, region_bytes(m, &src_shape)?, "a level-of-detail source mask")?;
                self.read_layer(m, &Region::new(&src_s, &src_shape)?, Order::C, &mut bits)?;
                Some(bits)
            }
            None => None,
        };
        let nv = nv.as_ref().map(|e| &e[..below.esize()]);
        let (out, out_shape, out_mask) = reduce(&src, &src_shape, &var.lod_axes, below.dtype, var.lod_method, nv, src_mask.as_deref());
        Ok((Region::new(&s, &out_shape)?, out, out_mask))
    }

    /// The regions in which partitioning `layer` is copied from `base` to
    /// bring its chunks `targets` up to date: blocks aligned to both chunk
    /// grids (each source chunk is decoded once, each target chunk written
    /// whole), or chunk by chunk when such a block would not fit a quarter
    /// of the memory limit.
    pub(super) fn partition_regions(&self, base: &Variable, layer: &Variable, targets: &BTreeSet<Vec<u64>>) -> BTreeSet<Bounds> {
        let block = joint_block(base, layer);
        let block_bytes = block.iter().product::<u64>().saturating_mul(base.esize() as u64);
        let unit = if block_bytes <= self.memory_limit / 4 { Some(block) } else { None };
        targets
            .iter()
            .map(|c| {
                let (s, e) = chunk_bounds(layer, c);
                match &unit {
                    Some(u) => {
                        let bs: Vec<u64> = s.iter().zip(u).map(|(&x, &k)| x / k * k).collect();
                        let be: Vec<u64> = bs.iter().zip(u).zip(&layer.shape).map(|((&x, &k), &n)| (x + k).min(n)).collect();
                        (bs, be)
                    }
                    None => (s, e),
                }
            })
            .collect()
    }

    /// Copies `block` of layer `from` into layer `to` (of the same shape and
    /// type). When the block is made of whole chunks of both layers (see
    /// [`Dataset::partition_regions`]) and `to` has no margins, each chunk
    /// of `from` in it is decoded once and its elements scattered straight
    /// into the chunks of `to` it feeds, held together in `buf`; those are
    /// then encoded on several cores and stored whole. This moves every
    /// element once, in runs along the source's innermost axes, where
    /// reading the block into one buffer and cutting it into the target
    /// chunks moves it twice, the second time one element at a time
    /// across the whole block for tiles that cut the innermost axis.
    /// Other blocks are copied as a region.
    pub(super) fn copy_block(&mut self, from: &Variable, to: &Variable, block: &Bounds, buf: &mut Vec<u8>) -> Result<()> {
        let (s, e) = block;
        let aligned = |l: &Variable| (0..s.len()).all(|d| s[d] % l.chunk[d] == 0 && (e[d] % l.chunk[d] == 0 || e[d] == l.shape[d]));
        let targets: Vec<Vec<u64>> = chunks_touching(to, std::slice::from_ref(block)).into_iter().collect();
        let esize = to.esize();
        let tbytes = to.chunk_elems * esize;
        let total = targets.len().saturating_mul(tbytes);
        if !aligned(from) || !aligned(to) || to.margin != [0, 0] || esize != from.esize() || total as u64 > self.memory_limit / 4 {
            let shape: Vec<u64> = s.iter().zip(e).map(|(a, b)| b - a).collect();
            return self.copy_region(from, to, &Region::new(s, &shape)?);
        }
        self.reserve(buf, total, "the chunks of a partitioning")?;
        // Target chunks reaching beyond the extent keep the fill value there, as a write leaves it.
        for (t, c) in targets.iter().enumerate() {
            let (valid, _) = valid_part(to, c);
            if valid.iter().map(|s| s.count).product::<usize>() != to.chunk_elems {
                fill_chunk(to, &to.fill, &mut buf[t * tbytes..(t + 1) * tbytes]);
            }
        }
        // The targets form a box of the target grid, in C order.
        let tlo: Vec<u64> = s.iter().zip(&to.chunk).map(|(&x, &c)| x / c).collect();
        let tdims: Vec<u64> = targets.last().map_or(Vec::new(), |l| l.iter().zip(&tlo).map(|(&h, &l)| h - l + 1).collect());
        let sources: Vec<Vec<u64>> = chunks_touching(from, std::slice::from_ref(block)).into_iter().collect();
        let src_bytes = from.chunk_elems * from.esize();
        let workers = if sources.len() * src_bytes < PARALLEL_MIN_BYTES { 1 } else { cores().min(sources.len()) };
        let this = &*self;
        let buffers = Buffers::new(src_bytes, self.memory_limit, "a chunk copied between layers")?;
        pipeline(
            sources.len(),
            workers,
            || (),
            |(), i| {
                let mut data = buffers.take()?;
                this.load_chunk(from, &sources[i], &mut data)?;
                Ok(data)
            },
            |i, data| {
                scatter(from, &sources[i], &data, to, &tlo, &tdims, buf);
                buffers.give(data);
                Ok(())
            },
        )?;
        let workers = if total < PARALLEL_MIN_BYTES { 1 } else { cores().min(targets.len()) };
        let buf = &buf[..];
        let result = pipeline(
            targets.len(),
            workers,
            || (),
            // Decoded values: a bounded codec stores them losslessly (SPEC.md 6.6).
            |(), t| Ok(prepare(to, &targets[t], &buf[t * tbytes..(t + 1) * tbytes], to.is_bounded())),
            |t, prepared| {
                let key = chunk_key(to, &targets[t]);
                self.unhold(&key);
                self.store_chunk(to, key, prepared, &buf[t * tbytes..(t + 1) * tbytes])
            },
        );
        if result.as_ref().is_err_and(|e| e.kind() == ErrorKind::Io) {
            self.poisoned = true;
        }
        result
    }

    /// Copies a region from one stored layer to another of the same shape and type.
    pub(super) fn copy_region(&mut self, from: &Variable, to: &Variable, region: &Region) -> Result<()> {
        let mut buf = Vec::new();
        self.reserve(&mut buf, region_bytes(from, region.shape())?, "a region copied between layers")?;
        self.read_layer(from, region, Order::C, &mut buf)?;
        self.writing_decoded = true;
        let written = self.write_layer(to, region, Order::C, &buf);
        self.writing_decoded = false;
        written
    }

    /// Reads a region of level of detail `lod` (in that level's coordinates:
    /// see [`Variable::lod_shape`]) from partitioning `partitioning`, or from
    /// the one that reads the fewest bytes when `None`. Level 0 is the data;
    /// a read at level k touches only level-k chunks.
    ///
    /// # Errors
    /// As [`Dataset::read`], and `OutOfRange` for a level or partitioning
    /// the variable does not have.
    pub fn read_lod<T: Element>(
        &self,
        var: impl VarRef,
        lod: u8,
        partitioning: Option<u8>,
        region: &Region,
        order: Order,
        out: &mut [T],
    ) -> Result<()> {
        let v = var.index_in(self)?;
        self.check_type(v, T::DTYPE)?;
        self.read_as(v, lod, partitioning, region, order, as_bytes_mut(out), T::DTYPE)
    }

    /// [`Dataset::read_lod`] on raw bytes (native byte order, one byte per bool).
    ///
    /// # Errors
    /// As [`Dataset::read_lod`].
    pub fn read_lod_bytes(
        &self,
        var: impl VarRef,
        lod: u8,
        partitioning: Option<u8>,
        region: &Region,
        order: Order,
        out: &mut [u8],
    ) -> Result<()> {
        let v = var.index_in(self)?;
        self.read_as(v, lod, partitioning, region, order, out, self.vars[v].dtype)
    }

    /// The partitioning [`Dataset::read_lod`] would read `region` of level
    /// `lod` from when not told.
    ///
    /// # Errors
    /// `NotFound`, `OutOfRange`.
    pub fn choose_partitioning(&self, var: impl VarRef, lod: u8, region: &Region) -> Result<u8> {
        let v = var.index_in(self)?;
        Ok((self.choose_layer(v, lod, None, region)?.layer_id & 0xff) as u8)
    }

    /// One axis-aligned 2-D plane at level of detail `lod`: `fixed` gives
    /// the index (at that level) of every axis but two, which run whole.
    /// Returns the values, in `order` over the two free axes (slower
    /// first), and the plane's shape. Reads from the partitioning that reads
    /// the fewest bytes, such as 2-D tiles across the plane.
    ///
    /// ```
    /// # use vds::*;
    /// # let dir = std::env::temp_dir().join(format!("vds-doc-slice-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let mut ds = DatasetBuilder::new()
    ///     .overwrite(true)
    ///     .axis(Axis::new("inline", 8)).axis(Axis::new("crossline", 6)).axis(Axis::new("time", 5))
    ///     .variable(VariableBuilder::new("amp", DType::Float32, &["inline", "crossline", "time"])
    ///         .chunk(&[4, 4, 4])
    ///         .partitioning(&[1, 6, 5])
    ///         .levels_of_detail(2, &[], LodMethod::Average))
    ///     .create(dir.join("slice.vds"))?;
    /// let data: Vec<f32> = (0..8 * 6 * 5).map(|i| i as f32).collect();
    /// ds.write("amp", &Region::full(&[8, 6, 5])?, Order::C, &data)?;
    /// ds.commit()?;
    /// let (plane, shape) = ds.read_slice::<f32>("amp", 0, &[(0, 3)], Order::C)?;
    /// assert_eq!(shape, [6, 5]);
    /// assert_eq!(plane[0], data[3 * 30]);
    /// // Level 1: 4 x 3 x 3 samples, each the mean of up to 2 x 2 x 2.
    /// let (small, shape) = ds.read_slice::<f32>("amp", 1, &[(2, 0)], Order::C)?;
    /// assert_eq!(shape, [4, 3]);
    /// # Ok::<(), vds::Error>(())
    /// ```
    ///
    /// # Errors
    /// `InvalidArgument` unless exactly two axes are left free; as
    /// [`Dataset::read_lod`].
    pub fn read_slice<T: Element + Default>(
        &self,
        var: impl VarRef,
        lod: u8,
        fixed: &[(usize, u64)],
        order: Order,
    ) -> Result<(Vec<T>, [u64; 2])> {
        let v = var.index_in(self)?;
        self.check_type(v, T::DTYPE)?;
        let (region, plane) = self.slice_region(v, lod, fixed)?;
        let elems = wire::to_usize(plane[0].saturating_mul(plane[1]), "slice element count")?;
        let bytes = (elems as u64).saturating_mul(std::mem::size_of::<T>() as u64);
        if bytes > self.memory_limit {
            return Err(Error::new(
                ErrorKind::OutOfMemory,
                format!("a slice of {bytes} bytes exceeds the memory limit of {} bytes", self.memory_limit),
            ));
        }
        let mut out = Vec::new();
        out.try_reserve_exact(elems)
            .map_err(|_| Error::new(ErrorKind::OutOfMemory, format!("cannot allocate a slice of {elems} values")))?;
        out.resize(elems, T::default());
        self.read_lod(v, lod, None, &region, order, &mut out)?;
        Ok((out, plane))
    }

    /// [`Dataset::read_slice`] into a caller's buffer of raw bytes (native
    /// byte order, one byte per bool), which must hold the plane exactly.
    /// Returns the plane's shape.
    ///
    /// # Errors
    /// As [`Dataset::read_slice`], and `BufferTooSmall` / `InvalidArgument`
    /// for a buffer of the wrong size.
    pub fn read_slice_bytes(&self, var: impl VarRef, lod: u8, fixed: &[(usize, u64)], order: Order, out: &mut [u8]) -> Result<[u64; 2]> {
        let v = var.index_in(self)?;
        self.read_slice_as(v, lod, fixed, order, out, self.vars[v].dtype)
    }

    /// [`Dataset::read_slice_bytes`] of elements of `as_type` (see `read_as`).
    pub(crate) fn read_slice_as(
        &self,
        v: usize,
        lod: u8,
        fixed: &[(usize, u64)],
        order: Order,
        out: &mut [u8],
        as_type: DType,
    ) -> Result<[u64; 2]> {
        let (region, plane) = self.slice_region(v, lod, fixed)?;
        self.read_as(v, lod, None, &region, order, out, as_type)?;
        Ok(plane)
    }

    /// The region of a slice and the shape of its plane.
    fn slice_region(&self, v: usize, lod: u8, fixed: &[(usize, u64)]) -> Result<(Region, [u64; 2])> {
        let shape = self.vars[v]
            .lod_shape(lod)
            .ok_or_else(|| Error::new(ErrorKind::OutOfRange, format!("variable {:?} has no level of detail {lod}", self.vars[v].name)))?;
        let n = shape.len();
        let mut start = vec![0u64; n];
        let mut count = shape.clone();
        let mut is_fixed = vec![false; n];
        for &(axis, index) in fixed {
            if axis >= n || std::mem::replace(&mut is_fixed[axis], true) {
                return Err(invalid(format!("axis {axis} is not one of the variable's {n} axes, or is fixed twice")));
            }
            if index >= shape[axis] {
                return Err(Error::new(ErrorKind::OutOfRange, format!("index {index} is outside axis {axis} (0 to {})", shape[axis] - 1)));
            }
            start[axis] = index;
            count[axis] = 1;
        }
        let free: Vec<usize> = (0..n).filter(|&d| !is_fixed[d]).collect();
        if free.len() != 2 {
            return Err(invalid(format!("a slice leaves two axes free; this one leaves {} of {n}", free.len())));
        }
        Ok((Region::new(&start, &count)?, [shape[free[0]], shape[free[1]]]))
    }
}

impl Dataset {
    /// Writes a region with its missing-value mask (`missing[i]` true: the
    /// value `data[i]` is missing), for a variable created with
    /// [`VariableBuilder::missing_mask`](crate::VariableBuilder::missing_mask).
    /// Values at missing positions are stored as given.
    ///
    /// # Errors
    /// As [`Dataset::write`]; `InvalidArgument` for a variable without a
    /// mask; `BufferTooSmall` / `InvalidArgument` for a mask shorter or
    /// longer than the region, checked before anything is written.
    pub fn write_masked<T: Element>(
        &mut self,
        var: impl VarRef,
        region: &Region,
        order: Order,
        data: &[T],
        missing: &[bool],
    ) -> Result<()> {
        let v = var.index_in(self)?;
        self.check_type(v, T::DTYPE)?;
        self.write_masked_as(v, region, order, as_bytes(data), T::DTYPE, Some(as_bytes(missing)))
    }

    /// The missing-value mask of a region of level `lod` (true: missing), in
    /// `order`, from the partitioning a read of the values would use (or
    /// `partitioning`). Unwritten samples are present.
    ///
    /// # Errors
    /// `InvalidArgument` for a variable without a mask; as [`Dataset::read_lod`].
    pub fn read_mask(&self, var: impl VarRef, lod: u8, partitioning: Option<u8>, region: &Region, order: Order) -> Result<Vec<bool>> {
        let v = var.index_in(self)?;
        let layer = self.choose_layer(v, lod, partitioning, region)?;
        let var = &self.vars[v];
        let mask = var
            .stored_layer(lod, MASK_LAYER | (layer.layer_id & 0xff) as u8)
            .ok_or_else(|| invalid(format!("variable {:?} keeps no missing-value mask", var.name)))?;
        let n = wire::to_usize(region.check_within(&mask.shape, &format_args!("variable {:?}", var.name))?, "region element count")?;
        let mut out = Vec::new();
        self.reserve(&mut out, n, "a missing-value mask")?;
        self.read_layer(mask, region, order, &mut out)?;
        Ok(out.into_iter().map(|b| b != 0).collect())
    }

    /// [`Dataset::read_mask`] into a caller's buffer of exactly one byte per
    /// element (1: missing), checked before anything is read.
    pub(crate) fn read_mask_into(
        &self,
        v: usize,
        lod: u8,
        partitioning: Option<u8>,
        region: &Region,
        order: Order,
        out: &mut [u8],
    ) -> Result<()> {
        let layer = self.choose_layer(v, lod, partitioning, region)?;
        let var = &self.vars[v];
        let mask = var
            .stored_layer(lod, MASK_LAYER | (layer.layer_id & 0xff) as u8)
            .ok_or_else(|| invalid(format!("variable {:?} keeps no missing-value mask", var.name)))?;
        self.read_layer(mask, region, order, out)
    }
}

impl Dataset {
    /// One brick (a chunk of the first partitioning at level `lod`, by its
    /// grid coordinates) as stored: its box plus the margins around it
    /// ([`VariableBuilder::margin`](crate::VariableBuilder::margin)), read
    /// from one chunk, in C order. Returns the values and the box's shape
    /// (chunk shape plus both margins); the box starts `margin[0]` samples
    /// before the brick, and samples outside the variable read as the fill
    /// value.
    ///
    /// # Errors
    /// `OutOfRange` for a level or coordinates the variable does not have;
    /// as [`Dataset::read`].
    pub fn read_brick<T: Element + Default>(&self, var: impl VarRef, lod: u8, coords: &[u64]) -> Result<(Vec<T>, Vec<u64>)> {
        let v = var.index_in(self)?;
        self.check_type(v, T::DTYPE)?;
        let layer = self.vars[v]
            .layer(lod, 0)
            .ok_or_else(|| Error::new(ErrorKind::OutOfRange, format!("variable {:?} has no level of detail {lod}", self.vars[v].name)))?;
        let mut out = Vec::new();
        out.try_reserve_exact(layer.chunk_elems).map_err(|_| Error::new(ErrorKind::OutOfMemory, "cannot allocate a brick"))?;
        out.resize(layer.chunk_elems, T::default());
        let shape = self.read_brick_as(v, lod, coords, as_bytes_mut(&mut out), T::DTYPE)?;
        Ok((out, shape))
    }

    /// [`Dataset::read_brick`] into a buffer of exactly one brick of `as_type` (see `read_as`).
    pub(crate) fn read_brick_as(&self, v: usize, lod: u8, coords: &[u64], out: &mut [u8], as_type: DType) -> Result<Vec<u64>> {
        let var = &self.vars[v];
        let layer = var
            .layer(lod, 0)
            .ok_or_else(|| Error::new(ErrorKind::OutOfRange, format!("variable {:?} has no level of detail {lod}", var.name)))?;
        if coords.len() != layer.grid.len() || coords.iter().zip(&layer.grid).any(|(c, g)| c >= g) {
            return Err(Error::new(
                ErrorKind::OutOfRange,
                format!("brick {coords:?} is outside the grid {:?} of {}", layer.grid, layer.name),
            ));
        }
        let esize = if var.quant.is_some_and(|q| q.storage == as_type) { layer.esize() } else { var.esize() };
        let need = layer.chunk_elems * esize;
        if out.len() != need {
            let kind = if out.len() < need { ErrorKind::BufferTooSmall } else { ErrorKind::InvalidArgument };
            return Err(Error::new(kind, format!("a brick needs a buffer of {need} bytes, the buffer has {}", out.len())));
        }
        let mut buf = Vec::new();
        self.reserve(&mut buf, layer.chunk_elems * layer.esize(), "a brick")?;
        self.load_chunk(layer, coords, &mut buf)?;
        // Samples outside the variable are the fill value, whatever the chunk holds there.
        let e = layer.esize();
        let mut fill = layer.fill;
        crate::codec::le_to_native(&mut fill[..e], e);
        outside_extent(layer, coords, |i| buf[i * e..(i + 1) * e].copy_from_slice(&fill[..e]));
        match var.quant {
            Some(q) if as_type != q.storage => super::quant::to_values(&q, var.dtype, &buf, out),
            _ => out.copy_from_slice(&buf),
        }
        Ok(layer.stored_chunk())
    }
}

/// Bytes of a region of `shape` of a layer, in memory.
pub(super) fn region_bytes(var: &Variable, shape: &[u64]) -> Result<usize> {
    wire::to_usize(wire::mul(wire::product(shape, "region")?, var.esize() as u64, "region bytes")?, "region bytes")
}

/// The chunks of `layer` that hold an element of any of `boxes`, in key order.
pub(super) fn chunks_touching(layer: &Variable, boxes: &[Bounds]) -> BTreeSet<Vec<u64>> {
    let mut out = BTreeSet::new();
    for (s, e) in boxes {
        let lo: Vec<u64> = s.iter().zip(&layer.chunk).map(|(&x, &c)| x / c).collect();
        let hi: Vec<u64> = e.iter().zip(&layer.chunk).zip(&layer.shape).map(|((&x, &c), &n)| (x.min(n).max(1) - 1) / c).collect();
        if s.iter().zip(e).any(|(a, b)| a >= b) {
            continue;
        }
        let mut c = lo.clone();
        loop {
            out.insert(c.clone());
            let mut d = c.len();
            loop {
                if d == 0 {
                    break;
                }
                d -= 1;
                if c[d] < hi[d] {
                    c[d] += 1;
                    break;
                }
                c[d] = lo[d];
                if d == 0 {
                    d = usize::MAX;
                    break;
                }
            }
            if d == usize::MAX {
                break;
            }
        }
    }
    out
}

/// Copies the elements of chunk `c` of `from` (`data`, decoded; its own
/// box, without margins) into the chunks of `to` that hold them: `buf`
/// holds those chunks one after another, for the box of the target grid
/// starting at `tlo` with `tdims` chunks per axis, in C order.
fn scatter(from: &Variable, c: &[u64], data: &[u8], to: &Variable, tlo: &[u64], tdims: &[u64], buf: &mut [u8]) {
    let n = c.len();
    let esize = to.esize();
    let tbytes = to.chunk_elems * esize;
    let (ss, se) = chunk_bounds(from, c);
    let sdims: Vec<usize> = from.stored_chunk().iter().map(|&x| x as usize).collect();
    let sst = strides(&sdims, Order::C);
    let tst = strides(&to.chunk.iter().map(|&x| x as usize).collect::<Vec<_>>(), Order::C);
    let mn = from.margin[0];
    // The target chunks this source overlaps.
    let lo: Vec<u64> = ss.iter().zip(&to.chunk).map(|(&x, &k)| x / k).collect();
    let hi: Vec<u64> = se.iter().zip(&to.chunk).map(|(&x, &k)| (x - 1) / k).collect();
    if ss.iter().zip(&se).any(|(a, b)| a >= b) {
        return;
    }
    let mut t = lo.clone();
    let mut spans = vec![Span { count: 0, src: 0, dst: 0 }; n];
    loop {
        let (mut src0, mut dst0, mut index) = (0usize, 0usize, 0usize);
        for d in 0..n {
            let ts = t[d] * to.chunk[d];
            let (a, b) = (ss[d].max(ts), se[d].min(ts + to.chunk[d]));
            spans[d] = Span { count: (b - a) as usize, src: sst[d], dst: tst[d] };
            src0 += (a + mn - c[d] * from.chunk[d]) as usize * sst[d];
            dst0 += (a - ts) as usize * tst[d];
            index = index * tdims[d] as usize + (t[d] - tlo[d]) as usize;
        }
        copy_block(&spans, esize, data, src0, &mut buf[index * tbytes..(index + 1) * tbytes], dst0);
        let mut d = n;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            if t[d] < hi[d] {
                t[d] += 1;
                break;
            }
            t[d] = lo[d];
        }
    }
}

/// The smallest box made of whole chunks of both layers along every axis
/// (the least common multiple of the two chunk extents), capped at the
/// extent: copying one such block rewrites whole target chunks and decodes
/// each source chunk once.
fn joint_block(a: &Variable, b: &Variable) -> Vec<u64> {
    fn gcd(x: u64, y: u64) -> u64 {
        if y == 0 {
            x
        } else {
            gcd(y, x % y)
        }
    }
    a.chunk.iter().zip(&b.chunk).zip(&a.shape).map(|((&x, &y), &n)| (x / gcd(x, y)).saturating_mul(y).min(n.max(1))).collect()
}

/// Calls `f` with the index of every element of a stored chunk (margins
/// included) that lies outside the layer's extent.
fn outside_extent(layer: &Variable, coords: &[u64], mut f: impl FnMut(usize)) {
    let stored = layer.stored_chunk();
    let [mn, _] = layer.margin;
    let n = stored.len();
    let mut l = vec![0u64; n];
    for i in 0..layer.chunk_elems {
        let outside = (0..n).any(|d| {
            let g = i128::from(coords[d] * layer.chunk[d] + l[d]) - i128::from(mn);
            g < 0 || g >= i128::from(layer.shape[d])
        });
        if outside {
            f(i);
        }
        for d in (0..n).rev() {
            l[d] += 1;
            if l[d] < stored[d] {
                break;
            }
            l[d] = 0;
        }
    }
}

/// The elements a chunk of `layer` holds inside the layer's extent.
pub(super) fn chunk_bounds(layer: &Variable, c: &[u64]) -> Bounds {
    let s: Vec<u64> = c.iter().zip(&layer.chunk).map(|(&c, &k)| c * k).collect();
    let e: Vec<u64> = s.iter().zip(&layer.chunk).zip(&layer.shape).map(|((&s, &k), &n)| (s + k).min(n)).collect();
    (s, e)
}

/// One level of detail from the level below: `src` (C order, native bytes,
/// `shape`) is halved along each axis marked in `halve`, in axis order.
/// Returns the result and its shape.
///
/// With a no-value `nv` (one native element), averaging skips it: the mean
/// of a value and no-value is the value, of two no-values the no-value.
///
/// With a missing-value `mask` (one byte per element, non-zero = missing),
/// averaging skips missing samples the same way, and the result's mask is
/// missing only where both samples were.
pub(crate) fn reduce(
    src: &[u8],
    shape: &[u64],
    halve: &[bool],
    dtype: DType,
    method: LodMethod,
    nv: Option<&[u8]>,
    mask: Option<&[u8]>,
) -> (Vec<u8>, Vec<u64>, Option<Vec<u8>>) {
    let esize = dtype.size();
    let mut cur = src.to_vec();
    let mut cur_mask = mask.map(<[u8]>::to_vec);
    let mut shape = shape.to_vec();
    for axis in (0..shape.len()).filter(|&a| halve[a]) {
        let n = shape[axis] as usize;
        let m = n.div_ceil(2);
        let outer: usize = shape[..axis].iter().product::<u64>() as usize;
        let inner: usize = shape[axis + 1..].iter().product::<u64>() as usize;
        let mut out = vec![0u8; outer * m * inner * esize];
        let mut out_mask = cur_mask.as_ref().map(|_| vec![0u8; outer * m * inner]);
        for o in 0..outer {
            for i in 0..m {
                let a = (o * n + 2 * i) * inner;
                let dst = (o * m + i) * inner;
                if method == LodMethod::Nearest || 2 * i + 1 == n {
                    out[dst * esize..(dst + inner) * esize].copy_from_slice(&cur[a * esize..(a + inner) * esize]);
                    if let (Some(om), Some(cm)) = (&mut out_mask, &cur_mask) {
                        om[dst..dst + inner].copy_from_slice(&cm[a..a + inner]);
                    }
                    continue;
                }
                let b = a + inner;
                if cur_mask.is_none() && nv.is_none() {
                    let row = |k: usize| &cur[k * esize..(k + inner) * esize];
                    mean_rows(dtype, row(a), row(b), &mut out[dst * esize..(dst + inner) * esize]);
                    continue;
                }
                for j in 0..inner {
                    let (x, y) = (&cur[(a + j) * esize..][..esize], &cur[(b + j) * esize..][..esize]);
                    let (mx, my) = cur_mask.as_ref().map_or((false, false), |cm| (cm[a + j] != 0, cm[b + j] != 0));
                    let o = &mut out[(dst + j) * esize..][..esize];
                    match nv {
                        _ if mx && my => o.copy_from_slice(x),
                        _ if mx => o.copy_from_slice(y),
                        _ if my => o.copy_from_slice(x),
                        Some(nv) if x == nv => o.copy_from_slice(y),
                        Some(nv) if y == nv => o.copy_from_slice(x),
                        _ => mean2(dtype, x, y, o),
                    }
                    if let Some(om) = &mut out_mask {
                        om[dst + j] = u8::from(mx && my);
                    }
                }
            }
        }
        cur = out;
        cur_mask = out_mask;
        shape[axis] = m as u64;
    }
    (cur, shape, cur_mask)
}

/// The mean of two float32 values, in f64 (where their sum is exact), rounded once.
#[inline(always)]
fn mean_f32(x: f32, y: f32) -> f32 {
    ((f64::from(x) + f64::from(y)) / 2.0) as f32
}

#[inline(always)]
fn mean_f64(x: f64, y: f64) -> f64 {
    (x + y) / 2.0
}

/// [`mean2`] of each pair of elements of rows `x` and `y` (native order,
/// no missing values) into `out`: a loop per type for the float types,
/// which the compiler vectorizes; element by element for the others.
// Buffers in memory are in native byte order; files never see these bytes.
#[allow(clippy::host_endian_bytes)]
fn mean_rows(dtype: DType, x: &[u8], y: &[u8], out: &mut [u8]) {
    macro_rules! rows {
        ($t:ty, $mean:expr) => {{
            const S: usize = std::mem::size_of::<$t>();
            for ((o, a), b) in out.chunks_exact_mut(S).zip(x.chunks_exact(S)).zip(y.chunks_exact(S)) {
                let m = $mean(<$t>::from_ne_bytes(a.try_into().unwrap_or_default()), <$t>::from_ne_bytes(b.try_into().unwrap_or_default()));
                o.copy_from_slice(&m.to_ne_bytes());
            }
        }};
    }
    match dtype {
        DType::Float32 => rows!(f32, mean_f32),
        DType::Float64 => rows!(f64, mean_f64),
        _ => {
            let e = dtype.size();
            for ((o, a), b) in out.chunks_exact_mut(e).zip(x.chunks_exact(e)).zip(y.chunks_exact(e)) {
                mean2(dtype, a, b, o);
            }
        }
    }
}

/// The mean of two native-order elements: floats in f64, then rounded to
/// the type; integers rounded to the nearest, halves away from zero.
// Buffers in memory are in native byte order; files never see these bytes.
#[allow(clippy::host_endian_bytes)]
fn mean2(dtype: DType, x: &[u8], y: &[u8], out: &mut [u8]) {
    macro_rules! int {
        ($t:ty) => {{
            let s = i128::from(<$t>::from_ne_bytes(x.try_into().unwrap_or_default()))
                + i128::from(<$t>::from_ne_bytes(y.try_into().unwrap_or_default()));
            let m = if s >= 0 { (s + 1) / 2 } else { (s - 1) / 2 };
            // The mean of two values of a type lies within the type.
            out.copy_from_slice(&(m as $t).to_ne_bytes());
        }};
    }
    match dtype {
        DType::Float32 => {
            let m = mean_f32(f32::from_ne_bytes(x.try_into().unwrap_or_default()), f32::from_ne_bytes(y.try_into().unwrap_or_default()));
            out.copy_from_slice(&m.to_ne_bytes());
        }
        DType::Float64 => {
            let m = mean_f64(f64::from_ne_bytes(x.try_into().unwrap_or_default()), f64::from_ne_bytes(y.try_into().unwrap_or_default()));
            out.copy_from_slice(&m.to_ne_bytes());
        }
        DType::Int8 => int!(i8),
        DType::Int16 => int!(i16),
        DType::Int32 => int!(i32),
        DType::Int64 => int!(i64),
        DType::UInt8 => int!(u8),
        DType::UInt16 => int!(u16),
        DType::UInt32 => int!(u32),
        DType::UInt64 => int!(u64),
        DType::Bool => out.copy_from_slice(x),
    }
}
