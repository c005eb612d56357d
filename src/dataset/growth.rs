//! Growing and shrinking axes (SPEC.md section 3.10): the descriptor's new
//! extent, chunks beyond a shrunk extent removed from the index, and the
//! chunks on the old edge of a grown one cleaned so that the new samples
//! read as the fill value.

use super::plan::{chunk_key, fill_chunk};
use super::write::{approximate, prepare};
use super::{Dataset, VarRef};
use crate::array::{as_bytes, Element, Order, Region};
use crate::error::{invalid, Error, ErrorKind, Result};
use crate::index::{Entry, Key};
use crate::spec::{DescBound, DescriptorJson};
use crate::spec::{Variable, MASK_LAYER};
use crate::wire;
use std::sync::Arc;

/// Sets axis `k` of `desc` to `samples`: the coordinate of the last sample
/// moves to keep the axis's spacing (1 for an axis that had one sample).
fn resized(desc: &mut DescriptorJson, k: usize, samples: u64) {
    let aj = &mut desc.axes[k];
    let old = aj.samples;
    let step = if old >= 2 { (aj.last - aj.first) / (old - 1) as f64 } else { 1.0 };
    aj.samples = samples;
    aj.last = aj.first + step * (samples - 1) as f64;
}

impl Dataset {
    /// Changes the number of samples of a growable axis (see
    /// [`Axis::growable`](crate::Axis::growable)), and so the extent of
    /// every variable that spans it. Samples added read as the fill value
    /// until written; chunks wholly beyond a smaller extent leave the index
    /// (their bytes are reclaimed by [`Dataset::compact`]). Levels of
    /// detail, partitionings, masks and margins follow at the next commit,
    /// which makes the change atomic like any other. The coordinate of the
    /// last sample moves to keep the axis's spacing (1 for an axis that had
    /// one sample).
    ///
    /// # Errors
    /// `NotFound` for an unknown axis; `InvalidArgument` for an axis that
    /// is not growable or 0 samples; `OutOfRange` beyond the axis's
    /// maximum or the format's limits; `ReadOnly`, `Poisoned`, and the
    /// errors of [`Dataset::write`] from rewriting the edge chunks, which
    /// leave the dataset poisoned.
    pub fn resize_axis(&mut self, axis: &str, samples: u64) -> Result<()> {
        self.resize_axes(&[(axis, samples)])
    }

    /// Changes several growable axes at once, as [`Dataset::resize_axis`]
    /// changes one: `sizes` gives (axis name, new number of samples). Every
    /// size is checked, and the format's limits with all of them applied,
    /// before any axis changes, so that a refused resize leaves every axis
    /// as it was.
    ///
    /// # Errors
    /// As [`Dataset::resize_axis`], and `InvalidArgument` for an axis given
    /// twice. A failure while rewriting the edge chunks (an I/O error, or
    /// memory beyond the limit) leaves the dataset poisoned: reopen it to
    /// continue from its last commit.
    pub fn resize_axes(&mut self, sizes: &[(&str, u64)]) -> Result<()> {
        self.check_writable()?;
        self.check_not_fragment()?;
        let mut desc = DescriptorJson::clone(&self.desc);
        let mut changes: Vec<(usize, u64)> = Vec::with_capacity(sizes.len());
        for (i, &(axis, samples)) in sizes.iter().enumerate() {
            let k = self
                .axes
                .iter()
                .position(|a| a.name == axis)
                .ok_or_else(|| Error::new(ErrorKind::NotFound, format!("no axis named {axis:?}")))?;
            if sizes[..i].iter().any(|&(other, _)| other == axis) {
                return Err(invalid(format!("axis {axis:?} is given twice")));
            }
            let a = &self.axes[k];
            if !a.growable {
                return Err(invalid(format!("axis {axis:?} is not growable (only an axis declared growable can be resized)")));
            }
            if samples == 0 {
                return Err(invalid(format!("axis {axis:?} cannot have 0 samples")));
            }
            if let Some(max) = a.max_samples.filter(|&m| samples > m) {
                return Err(Error::new(ErrorKind::OutOfRange, format!("axis {axis:?} may grow to {max} samples, not {samples}")));
            }
            if samples != a.samples {
                resized(&mut desc, k, samples);
                changes.push((k, samples));
            }
        }
        if changes.is_empty() {
            return Ok(());
        }
        // The limits (samples, chunks) with every axis changed, and that the descriptor
        // (its numbers longer) still reads back: checked before any axis changes.
        desc.validate(ErrorKind::OutOfRange)?;
        // An axis's samples and last coordinate grow by at most 40 characters of text.
        let n = changes.len() as u64;
        let growth = DescBound { bytes: 64 * n, cost: 256 * n };
        let bound = desc.bound_after(self.desc_bound, Some(growth), self.memory_limit).map_err(invalid)?;
        // The resize rewrites edge chunks from the index: held chunks go there first.
        self.flush_held()?;
        // Shrinks first, then growths: every state on the way lies within the old one
        // and the new one, and so within the limits both are.
        changes.sort_by_key(|&(k, samples)| samples > self.axes[k].samples);
        for (k, samples) in changes {
            if let Err(e) = self.resize_one(k, samples) {
                // Some axes may have changed, or edge chunks been left as they were.
                self.poisoned = true;
                return Err(e);
            }
        }
        self.desc_bound = Some(bound);
        Ok(())
    }

    /// Changes axis `k` to `samples`, checked by [`Dataset::resize_axes`].
    fn resize_one(&mut self, k: usize, samples: u64) -> Result<()> {
        let mut desc = DescriptorJson::clone(&self.desc);
        resized(&mut desc, k, samples);
        let (axes, vars) = desc.validate(ErrorKind::OutOfRange)?;
        // Everything above is checked; from here on the dataset changes.
        let old_vars = std::mem::replace(&mut self.vars, Arc::new(vars));
        self.axes = Arc::new(axes);
        self.desc = Arc::new(desc);
        self.desc_bound = None;
        self.desc_dirty = true;
        // Regions waiting for the layers' update stay inside the new extents.
        for (w, (s, e)) in &mut self.dirty {
            for (x, &n) in self.vars[*w].shape.iter().enumerate() {
                e[x] = e[x].min(n);
                s[x] = s[x].min(e[x]);
            }
        }
        self.dirty.retain(|(_, (s, e))| s.iter().zip(e).all(|(a, b)| a < b));
        for (v, old) in old_vars.iter().enumerate() {
            let Some(d) = old.axes.iter().position(|&x| x == k) else { continue };
            self.resize_variable(old, v, d)?;
        }
        Ok(())
    }

    /// Brings the stored layers of variable `v` to its new extent along
    /// dimension `d`; `old` is the variable as it was.
    fn resize_variable(&mut self, old: &Variable, v: usize, d: usize) -> Result<()> {
        let new = self.vars[v].clone();
        let pairs: Vec<(&Variable, &Variable)> = old.layers.iter().zip(&new.layers).chain(old.masks.iter().zip(&new.masks)).collect();
        for (was, now) in pairs {
            let (old_e, new_e) = (was.shape[d], now.shape[d]);
            if new_e < old_e {
                let grid = now.grid[d];
                for key in self.layer_keys(now, |c| u64::from(c[d]) >= grid)? {
                    self.pending.insert(key, None);
                }
            } else if new_e > old_e {
                self.clear_beyond(now, d, old_e)?;
            }
        }
        let (old_e, new_e) = (old.shape[d], new.shape[d]);
        // Levels of detail average across the old edge: recompute there.
        if new.lods > 1 {
            let edge = old_e.min(new_e);
            let (lo, hi) = (edge - 1, (edge + 1).min(new_e));
            let mut start = vec![0; new.shape.len()];
            let mut shape = new.shape.clone();
            (start[d], shape[d]) = (lo, hi - lo);
            self.mark_dirty(v, &Region::new(&start, &shape)?);
        }
        // New bricks' margins hold copies of the samples before the old edge.
        let [mn, _] = new.margin;
        if new_e > old_e && mn > 0 {
            for layer in [new.layer(0, 0), new.stored_layer(0, MASK_LAYER)].into_iter().flatten() {
                let lo = old_e.saturating_sub(mn);
                self.recopy_slab(layer, d, lo, old_e)?;
            }
        }
        Ok(())
    }

    /// The keys of `layer` (committed or pending, not removed) whose
    /// coordinates satisfy `pick`.
    fn layer_keys(&self, layer: &Variable, pick: impl Fn(&[u32; 8]) -> bool) -> Result<Vec<Key>> {
        let id = Key::layer_of(layer.index) | u32::from(layer.layer_id);
        let mut keys = Vec::new();
        self.reader.for_each_in(&*self.storage, self.commit.root, id..=id, &mut |k, _| {
            if !self.pending.contains_key(k) && pick(&k.coords) {
                keys.push(*k);
            }
            Ok(())
        })?;
        let lo = Key { layer: id, coords: [0; 8] };
        let hi = Key { layer: id, coords: [u32::MAX; 8] };
        keys.extend(self.pending.range(lo..=hi).filter(|(k, e)| e.is_some() && pick(&k.coords)).map(|(k, _)| *k));
        keys.sort_unstable();
        Ok(keys)
    }

    /// Sets every sample at or beyond `old_e` along dimension `d` of the
    /// chunks of `layer` that hold such samples (margins included) to the
    /// fill value: the format leaves those positions unspecified, and they
    /// are inside the extent now.
    fn clear_beyond(&mut self, layer: &Variable, d: usize, old_e: u64) -> Result<()> {
        let c = layer.chunk[d];
        let [mn, mp] = layer.margin;
        // Chunk j stores samples [j*c - mn, (j+1)*c + mp) along d.
        let first = old_e.saturating_sub(mp) / c;
        let old_grid = old_e.div_ceil(c);
        let keys = self.layer_keys(layer, |k| (first..old_grid).contains(&u64::from(k[d])))?;
        let dims = layer.stored_chunk();
        let inner: u64 = dims[d + 1..].iter().product();
        let outer: u64 = dims[..d].iter().product();
        let esize = layer.esize();
        let mut buf = Vec::new();
        self.reserve(&mut buf, layer.chunk_elems * esize, "an edge chunk")?;
        let mut fill = Vec::new();
        self.reserve(&mut fill, layer.chunk_elems * esize, "a chunk of fill values")?;
        fill_chunk(layer, &layer.fill, &mut fill);
        for key in keys {
            let entry = self.entry(&key)?;
            if matches!(entry, None | Some(Entry::Fill)) {
                continue; // every position holds the fill value already
            }
            let coords: Vec<u64> = key.coords[..dims.len()].iter().map(|&x| u64::from(x)).collect();
            let lossless = approximate(&entry);
            self.load_entry(layer, &coords, entry, &mut buf)?;
            // Chunk-local positions from p0 on along d lie at or beyond old_e.
            let p0 = (old_e + mn).saturating_sub(coords[d] * c);
            if p0 >= dims[d] {
                continue;
            }
            let run = ((dims[d] - p0) * inner) as usize * esize;
            for o in 0..outer {
                let at = ((o * dims[d] + p0) * inner) as usize * esize;
                buf[at..at + run].copy_from_slice(&fill[at..at + run]);
            }
            self.store_chunk(layer, chunk_key(layer, &coords), prepare(layer, &coords, &buf, lossless), &buf)?;
        }
        Ok(())
    }

    /// Reads samples `lo..hi` along dimension `d` of a layer (all of every
    /// other dimension) and writes them back, one chunk row at a time: the
    /// write reaches every chunk whose margins hold a copy of them.
    fn recopy_slab(&mut self, layer: &Variable, d: usize, lo: u64, hi: u64) -> Result<()> {
        let n = layer.shape.len();
        let mut at = vec![0u64; n];
        loop {
            let mut start = vec![0u64; n];
            let mut shape = vec![0u64; n];
            for x in 0..n {
                if x == d {
                    (start[x], shape[x]) = (lo, hi - lo);
                } else {
                    start[x] = at[x] * layer.chunk[x];
                    shape[x] = layer.chunk[x].min(layer.shape[x] - start[x]);
                }
            }
            self.copy_region(layer, layer, &Region::new(&start, &shape)?)?;
            // Next chunk row, skipping dimension d.
            let mut x = n;
            loop {
                if x == 0 {
                    return Ok(());
                }
                x -= 1;
                if x == d {
                    continue;
                }
                if at[x] + 1 < layer.grid[x] {
                    at[x] += 1;
                    break;
                }
                at[x] = 0;
            }
        }
    }

    /// Grows `axis` by the samples in `data` and writes them at its end:
    /// `data` holds the variable's extent along every other axis and any
    /// whole number of samples along `axis`, in `order`. Returns the region
    /// written. Other variables spanning the axis read the fill value there.
    ///
    /// ```
    /// # use vds::*;
    /// # let dir = std::env::temp_dir().join(format!("vds-doc-append-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let mut ds = DatasetBuilder::new()
    ///     .overwrite(true)
    ///     .axis(Axis::new("time", 1).growable(None))
    ///     .axis(Axis::new("station", 3))
    ///     .variable(VariableBuilder::new("temp", DType::Float32, &["time", "station"]).chunk(&[16, 3]))
    ///     .create(dir.join("append.vds"))?;
    /// ds.write("temp", &Region::full(&[1, 3])?, Order::C, &[1.0f32, 2.0, 3.0])?;
    /// let r = ds.append("temp", "time", Order::C, &[4.0f32, 5.0, 6.0, 7.0, 8.0, 9.0])?;
    /// assert_eq!(r.start(), &[1, 0]);
    /// ds.commit()?;
    /// assert_eq!(ds.variable("temp")?.shape(), [3, 3]);
    /// # Ok::<(), vds::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Dataset::resize_axis`] and [`Dataset::write`]; `InvalidArgument`
    /// when the variable does not span `axis` or `data` does not hold a
    /// whole number of samples along it.
    pub fn append<T: Element>(&mut self, var: impl VarRef, axis: &str, order: Order, data: &[T]) -> Result<Region> {
        let v = var.index_in(self)?;
        self.check_type(v, T::DTYPE)?;
        self.append_as(v, axis, order, as_bytes(data), T::DTYPE)
    }

    /// [`Dataset::append`] on raw bytes (native byte order, one byte per bool).
    ///
    /// # Errors
    /// As [`Dataset::append`], without `TypeMismatch`.
    pub fn append_bytes(&mut self, var: impl VarRef, axis: &str, order: Order, data: &[u8]) -> Result<Region> {
        let v = var.index_in(self)?;
        self.append_as(v, axis, order, data, self.vars[v].dtype)
    }

    pub(crate) fn append_as(&mut self, v: usize, axis: &str, order: Order, data: &[u8], as_type: crate::DType) -> Result<Region> {
        self.check_writable()?;
        let var = &self.vars[v];
        let d = var
            .axes
            .iter()
            .position(|&k| self.axes[k].name == axis)
            .ok_or_else(|| invalid(format!("variable {:?} does not span axis {axis:?}", var.name)))?;
        let esize = as_type.size() as u64;
        let row = var.shape.iter().enumerate().filter(|&(x, _)| x != d).map(|(_, &n)| n).product::<u64>().saturating_mul(esize);
        if data.is_empty() || data.len() as u64 % row != 0 {
            return Err(invalid(format!(
                "{} bytes are not a whole number of samples along axis {axis:?} ({row} bytes each) of variable {:?}",
                data.len(),
                var.name
            )));
        }
        let added = data.len() as u64 / row;
        let old = var.shape[d];
        let new = wire::add(old, added, "axis samples")?;
        let mut start = vec![0; var.shape.len()];
        let mut shape = var.shape.clone();
        (start[d], shape[d]) = (old, added);
        self.resize_axis(axis, new)?;
        let region = Region::new(&start, &shape)?;
        self.write_as(v, &region, order, data, as_type)?;
        Ok(region)
    }
}
