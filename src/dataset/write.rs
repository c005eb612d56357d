//! The write path: a region cut into chunks; chunks it covers gathered and
//! encoded on several cores, partly covered ones read, updated and held
//! until the commit; each chunk reduced to a constant entry or encoded and
//! appended to the file slot the slot policy chooses.

use super::plan::{
    chunk_key, cores, fill_chunk, for_each_chunk, pipeline, valid_part, within_limit, Buffers, ChunkPlan, PARALLEL_MIN_BYTES,
};
use super::{quant, Dataset, SlotPolicy, VarRef};
use crate::array::{as_bytes, block_is_constant, contiguous_runs, copy_block, Element, Order, Region, Span};
use crate::codec::{self, blocks, blocks::CODEC_BLOCKS};
use crate::error::{invalid, Error, ErrorKind, Result};
use crate::index::{Entry, Key};
use crate::spec::{Codec, Compression, DType, Variable};
use crate::wire::{self};

impl Dataset {
    /// Writes a region of a variable from `data`, laid out in `order`.
    ///
    /// Chunks the region covers completely are replaced; partly covered
    /// chunks are read, updated and rewritten. Chunks whose values all equal
    /// one value are kept as index entries only. The writes become durable
    /// and visible to other handles at the next [`Dataset::commit`].
    ///
    /// # Errors
    /// As [`Dataset::read`], and `ReadOnly`, `Poisoned`, `Io`.
    pub fn write<T: Element>(&mut self, var: impl VarRef, region: &Region, order: Order, data: &[T]) -> Result<()> {
        let v = var.index_in(self)?;
        self.check_type(v, T::DTYPE)?;
        self.write_as(v, region, order, as_bytes(data), T::DTYPE)
    }

    /// [`Dataset::write`] on raw bytes: `data` holds the region's elements in
    /// native byte order (one byte per bool, any non-zero byte is true).
    ///
    /// # Errors
    /// As [`Dataset::write`], without `TypeMismatch`.
    pub fn write_bytes(&mut self, var: impl VarRef, region: &Region, order: Order, data: &[u8]) -> Result<()> {
        let v = var.index_in(self)?;
        self.write_as(v, region, order, data, self.vars[v].dtype)
    }

    /// [`Dataset::write_masked`](crate::Dataset::write_masked) on raw bytes:
    /// `data` as for [`Dataset::write_bytes`], `missing[i]` true where the
    /// value is missing.
    ///
    /// # Errors
    /// As [`Dataset::write_masked`](crate::Dataset::write_masked), without `TypeMismatch`.
    pub fn write_bytes_masked(&mut self, var: impl VarRef, region: &Region, order: Order, data: &[u8], missing: &[bool]) -> Result<()> {
        let v = var.index_in(self)?;
        self.write_masked_as(v, region, order, data, self.vars[v].dtype, Some(as_bytes(missing)))
    }

    /// Writes level 0 of variable `v` from `data`, holding elements of
    /// `as_type`: the variable's type (quantized if the variable is), or a
    /// quantized variable's storage type.
    pub(crate) fn write_as(&mut self, v: usize, region: &Region, order: Order, data: &[u8], as_type: DType) -> Result<()> {
        self.write_masked_as(v, region, order, data, as_type, None)
    }

    /// Writes a region and, for a variable with a missing-value mask, its
    /// mask: `missing` (one byte per element, non-zero = missing, in the
    /// same order), or all present when `None`.
    pub(crate) fn write_masked_as(
        &mut self,
        v: usize,
        region: &Region,
        order: Order,
        data: &[u8],
        as_type: DType,
        missing: Option<&[u8]>,
    ) -> Result<()> {
        self.check_writable()?;
        if self.fragment.is_some() && self.vars[v].margin != [0, 0] {
            // Margins copy neighbours' samples: writers of adjacent regions would collide.
            return Err(invalid(format!(
                "variable {:?} has margins: write it in the container, not through a fragment",
                self.vars[v].name
            )));
        }
        if let Some(m) = missing {
            let Some(mask) = self.vars[v].masks.first() else {
                return Err(invalid(format!("variable {:?} keeps no missing-value mask", self.vars[v].name)));
            };
            // Checked before anything is written.
            self.check_request_as(mask, 1, region, m.len())?;
        }
        // Noted first, so that even a write that fails halfway is carried
        // into the other layers by the next commit.
        self.mark_dirty(v, region);
        // A handle on the variables (not a copy): writing takes `&mut self`.
        let vars = self.vars.clone();
        let layer = &vars[v].layers[0];
        let (dtype, quant) = (vars[v].dtype, vars[v].quant);
        match quant {
            Some(q) if as_type != q.storage => {
                let n = self.check_request_as(layer, dtype.size(), region, data.len())?;
                let mut ints = Vec::new();
                self.reserve(&mut ints, n * layer.esize(), "the quantized integers of a region")?;
                quant::to_integers(&q, dtype, data, &mut ints);
                self.write_layer(layer, region, order, &ints)?;
            }
            _ => self.write_layer(layer, region, order, data)?,
        }
        // The mask after the values, whose write checks the region and buffer first.
        if let Some(mask) = vars[v].masks.first() {
            let n = wire::to_usize(region.check_within(&mask.shape, &format_args!("variable {:?}", mask.name))?, "region element count")?;
            let mut present = Vec::new();
            let bits: &[u8] = match missing {
                Some(m) => m,
                None => {
                    self.reserve(&mut present, n, "a missing-value mask")?;
                    &present
                }
            };
            self.write_layer(mask, region, order, bits)?;
        }
        Ok(())
    }

    /// Writes a region of one stored layer.
    pub(super) fn write_layer(&mut self, var: &Variable, region: &Region, order: Order, data: &[u8]) -> Result<()> {
        if self.check_request(var, region, data.len())? == 0 {
            return Ok(());
        }
        let esize = var.esize();
        let what = format!("a chunk of variable {:?}", var.name);
        let chunk_bytes = var.chunk_elems * esize;
        // Its size is checked against the memory limit before anything is
        // written; it is allocated (zeroed) when a chunk first needs it: a
        // chunk stored raw from the caller's rows does not.
        within_limit(chunk_bytes, self.memory_limit, &what)?;
        let mut buf = Vec::new();
        // Values decoded from a bounded layer are approximations already.
        let decoded = self.writing_decoded && var.is_bounded();
        // Chunks the region covers entirely need no old contents: they are
        // gathered and encoded on several cores. The others are read,
        // updated and rewritten here, one by one.
        let mut full: Vec<(Vec<u64>, ChunkPlan)> = Vec::new();
        // Partly covered chunks are held (SPEC.md 7.1): a later write to the
        // same chunk updates it in memory, and the commit stores it once.
        let result = for_each_chunk(var, region, order, true, |coords, plan| {
            let key = chunk_key(var, coords);
            if plan.covers_chunk {
                self.unhold(&key);
                full.push((coords.to_vec(), plan.clone()));
                return Ok(());
            }
            if let Some(h) = self.held.get_mut(&key) {
                gather(var, plan, data, &mut h.data);
                return Ok(());
            }
            // The rest of the chunk may hold approximations already: stored
            // lossily again they would drift beyond the bound.
            let lossless = decoded || (var.is_bounded() && approximate(&self.entry(&key)?));
            if buf.is_empty() {
                self.reserve(&mut buf, chunk_bytes, &what)?;
            }
            self.load_chunk(var, coords, &mut buf)?;
            gather(var, plan, data, &mut buf);
            let mut next = Vec::new();
            if buf.len() <= self.held_limit {
                // The next chunk needs a buffer of its own.
                self.reserve(&mut next, chunk_bytes, &what)?;
            }
            match self.hold(key, var, coords, std::mem::replace(&mut buf, next), lossless)? {
                None => {}
                Some(unheld) => {
                    buf = unheld;
                    self.store_chunk(var, key, prepare(var, coords, &buf, lossless), &buf)?;
                }
            }
            Ok(())
        })
        .and_then(|()| {
            let workers = if full.len() * var.chunk_elems * esize < PARALLEL_MIN_BYTES { 1 } else { cores().min(full.len()) };
            if workers < 2 {
                for (coords, plan) in &full {
                    // A chunk stored raw whose rows lie whole in the caller's buffer is written from there.
                    if let Some(runs) = raw_runs(var, coords, plan) {
                        self.store_chunk(var, chunk_key(var, coords), prepare_runs(var, data, runs), data)?;
                        continue;
                    }
                    if buf.is_empty() {
                        self.reserve(&mut buf, chunk_bytes, &what)?;
                    }
                    fill_chunk(var, &var.fill, &mut buf);
                    gather(var, plan, data, &mut buf);
                    self.store_chunk(var, chunk_key(var, coords), prepare(var, coords, &buf, decoded), &buf)?;
                }
                return Ok(());
            }
            // Each worker holds one chunk buffer.
            if (workers * var.chunk_elems * esize) as u64 > self.memory_limit {
                return Err(Error::new(ErrorKind::OutOfMemory, format!("{workers} buffers for {what} exceed the memory limit")));
            }
            self.encode_parallel(var, &full, data, workers)
        });
        if let Err(e) = &result {
            if e.kind() == ErrorKind::Io {
                self.poisoned = true;
            }
        }
        result
    }

    /// Gathers and encodes fully covered chunks on `workers` threads while
    /// this thread appends them to the file. At most two encoded chunks per
    /// worker wait to be written.
    /// A chunk stored raw whose rows lie whole in the caller's buffer is
    /// written from there: each byte is read once for the checksums and
    /// copied once, into the file. Another chunk stored raw is written from
    /// its buffer, which then goes back to the workers.
    fn encode_parallel(&mut self, var: &Variable, full: &[(Vec<u64>, ChunkPlan)], data: &[u8], workers: usize) -> Result<()> {
        let buffers = Buffers::new(var.chunk_elems * var.esize(), self.memory_limit, "a chunk buffer")?;
        let decoded = self.writing_decoded && var.is_bounded();
        pipeline(
            full.len(),
            workers,
            || (),
            |(), i| {
                let (coords, plan) = &full[i];
                if let Some(runs) = raw_runs(var, coords, plan) {
                    return Ok((prepare_runs(var, data, runs), None));
                }
                let mut buf = buffers.take()?;
                // The region covers the chunk's valid part, so only a chunk
                // that reaches beyond the variable's extent needs its fill.
                let (valid, _) = valid_part(var, coords);
                if valid.iter().map(|s| s.count).product::<usize>() != var.chunk_elems {
                    fill_chunk(var, &var.fill, &mut buf);
                }
                gather(var, plan, data, &mut buf);
                let prepared = prepare(var, coords, &buf, decoded);
                // Only a chunk written from its buffer keeps it until it is stored.
                if matches!(prepared, Prepared::Runs { .. }) {
                    return Ok((prepared, Some(buf)));
                }
                buffers.give(buf);
                Ok((prepared, None))
            },
            |i, (prepared, buf)| {
                self.store_chunk(var, chunk_key(var, &full[i].0), prepared, buf.as_deref().unwrap_or(data))?;
                if let Some(buf) = buf {
                    buffers.give(buf);
                }
                Ok(())
            },
        )
    }

    /// Stores a prepared chunk ([`Dataset::store_prepared`]) as the chunk
    /// `key` of the next commit.
    pub(super) fn store_chunk(&mut self, var: &Variable, key: Key, prepared: Prepared, source: &[u8]) -> Result<()> {
        let entry = self.store_prepared(var, prepared, source)?;
        self.pending.insert(key, Some(entry));
        Ok(())
    }

    /// Writes a prepared chunk's bytes (if any) and returns its index entry.
    /// A chunk whose stored bytes equal those of a chunk already in the file
    /// (same XXH64, length, codec and CRC32, then compared byte for byte)
    /// shares them instead.
    /// `source` is what `prepared` was made from (the chunk in memory form,
    /// or the caller's buffer), which [`Prepared::Runs`] points into.
    pub(super) fn store_prepared(&mut self, var: &Variable, prepared: Prepared, source: &[u8]) -> Result<Entry> {
        let (codec_byte, pieces, crc, hash): (u8, Vec<&[u8]>, u32, u64) = match &prepared {
            Prepared::Entry(e) => return Ok(*e),
            Prepared::Bytes { codec, bytes, crc, hash } => (*codec, vec![&bytes[..]], *crc, *hash),
            Prepared::Runs { crc, hash, runs } => {
                (codec::CODEC_NONE, runs.iter().map(|&(at, n)| &source[at..at + n]).collect(), *crc, *hash)
            }
        };
        let length = pieces.iter().map(|p| p.len()).sum::<usize>() as u32;
        if let Some(e) = self.find_duplicate(codec_byte, &pieces, crc, hash)? {
            return Ok(e);
        }
        let slot = self.next_slot(var.index);
        let storage = self.slot_storage(slot)?;
        let offset = if slot == 0 {
            self.end
        } else {
            let i = usize::from(slot) - 1;
            match self.slot_ends[i] {
                Some(e) => e,
                None => storage.len().map_err(|e| Error::io(format!("reading the length of external file slot {slot}"), e))?,
            }
        };
        let end = wire::add(offset, u64::from(length), "file length")?;
        let written = match &pieces[..] {
            [bytes] => storage.write_at(offset, bytes),
            _ => storage.write_pieces_at(offset, &pieces),
        };
        written.map_err(|e| Error::io(format!("writing a chunk of variable {:?}", var.name), e))?;
        if slot == 0 {
            self.end = end;
        } else {
            self.slot_ends[usize::from(slot) - 1] = Some(end);
        }
        // Files that do not announce chunk hashes keep the field 0 (SPEC.md 5.5).
        let entry = Entry::Stored { codec: codec_byte, slot, offset, length, crc, hash: if self.records_hashes() { hash } else { 0 } };
        if let Some(map) = &mut self.dedup {
            map.entry((hash, length, codec_byte)).or_insert(entry);
        }
        Ok(entry)
    }

    /// The slot the next stored chunk goes to, by the slot policy.
    fn next_slot(&mut self, var: usize) -> u16 {
        match &self.policy {
            SlotPolicy::ByVariable(list) => list.get(var).copied().unwrap_or(0),
            SlotPolicy::Fixed(s) => *s,
            SlotPolicy::RoundRobin(list) => {
                let s = list[self.turn % list.len()];
                self.turn = self.turn.wrapping_add(1);
                s
            }
            SlotPolicy::BySize { slots, max_bytes } => {
                let used = |s: u16| if s == 0 { self.end } else { self.slot_ends[usize::from(s) - 1].unwrap_or(0) };
                while self.turn + 1 < slots.len() && used(slots[self.turn]) >= *max_bytes {
                    self.turn += 1;
                }
                slots[self.turn.min(slots.len() - 1)]
            }
        }
    }
}

/// A chunk ready to be stored: an entry alone, or encoded bytes to write
/// with their codec byte, CRC32 and XXH64 (computed where the chunk was
/// encoded), or ranges of what it was made from, stored raw.
pub(super) enum Prepared {
    Entry(Entry),
    Bytes {
        codec: u8,
        bytes: Vec<u8>,
        crc: u32,
        hash: u64,
    },
    /// Stored raw (codec byte 0) without being copied: its bytes are these
    /// ranges (offset, length) of what it was made from, joined: the whole
    /// chunk buffer, whose memory form is its raw form, or the rows of the
    /// caller's buffer that make the chunk.
    Runs {
        crc: u32,
        hash: u64,
        runs: Vec<(usize, usize)>,
    },
}

impl Prepared {
    /// The index entry of the chunk as if stored at offset 0 of the container.
    pub(super) fn entry_unplaced(&self) -> Entry {
        match self {
            Prepared::Entry(e) => *e,
            Prepared::Bytes { codec, bytes, crc, hash } => {
                Entry::Stored { codec: *codec, slot: 0, offset: 0, length: bytes.len() as u32, crc: *crc, hash: *hash }
            }
            Prepared::Runs { crc, hash, runs } => {
                let length = runs.iter().map(|r| r.1).sum::<usize>() as u32;
                Entry::Stored { codec: codec::CODEC_NONE, slot: 0, offset: 0, length, crc: *crc, hash: *hash }
            }
        }
    }
}

/// Chunks in runs shorter than this are gathered instead: each piece of a
/// vectored write costs the kernel about as much as copying it. Written
/// from runs of 256 bytes (64^3 float32 bricks), 512 MiB took 1.4x to 2.3x
/// as long as gathered; from slabs (one run each), 0.5x to 0.9x.
const MIN_RUN_BYTES: usize = 32 << 10;

/// The ranges of the caller's buffer that are, joined, the raw form of a
/// chunk the region covers entirely, when the chunk is stored raw, lies
/// inside the variable's extent and its rows lie whole in the caller's
/// buffer (C order, no step along the last axis); None otherwise.
fn raw_runs(var: &Variable, coords: &[u64], plan: &ChunkPlan) -> Option<Vec<(usize, usize)>> {
    if var.block_grid().is_some()
        || !matches!(var.codec.compression, Compression::None)
        || !codec::raw_is_memory_form(var.dtype)
        || var.margin != [0, 0]
        || plan.src0 != 0
        || valid_part(var, coords).0.iter().map(|s| s.count).product::<usize>() != var.chunk_elems
    {
        return None;
    }
    let esize = var.esize();
    let rev: Vec<Span> = plan.spans.iter().map(|s| Span { count: s.count, src: s.dst, dst: s.src }).collect();
    // A chunk that is one run is written from it whatever its size: no piece of a vectored write.
    let runs = contiguous_runs(&rev, esize, plan.dst0, 0, MIN_RUN_BYTES.min(var.chunk_elems * esize))?;
    (runs.iter().map(|r| r.1).sum::<usize>() == var.chunk_elems * esize).then_some(runs)
}

/// [`prepare`] for a chunk whose raw form is `runs` of `data`: a constant
/// entry, or the checksums of the runs, in one pass over them.
fn prepare_runs(var: &Variable, data: &[u8], runs: Vec<(usize, usize)>) -> Prepared {
    let esize = var.esize();
    let first = &data[runs[0].0..runs[0].0 + esize];
    if runs.iter().all(|&(at, n)| data[at..at + n].chunks_exact(esize).all(|e| e == first)) {
        return Prepared::Entry(constant_entry(var, first));
    }
    let mut sums = crate::hash::Sums::new();
    for &(at, n) in &runs {
        sums.update(&data[at..at + n]);
    }
    let (crc, hash) = sums.finish();
    Prepared::Runs { crc, hash, runs }
}

/// The entry of a chunk whose every value is `value` (one element, native order).
fn constant_entry(var: &Variable, value: &[u8]) -> Entry {
    let esize = var.esize();
    let mut le = [0u8; 8];
    le[..esize].copy_from_slice(value);
    codec::native_to_le(&mut le[..esize], esize);
    if le == var.fill {
        Entry::Fill
    } else {
        Entry::Constant { value: le }
    }
}

/// Copies the region's elements for one chunk from the caller's buffer into
/// the chunk buffer (the reverse of a read), normalizing bools to 0 or 1.
pub(super) fn gather(var: &Variable, plan: &ChunkPlan, data: &[u8], buf: &mut [u8]) {
    let rev: Vec<Span> = plan.spans.iter().map(|s| Span { count: s.count, src: s.dst, dst: s.src }).collect();
    copy_block(&rev, var.esize(), data, plan.dst0, buf, plan.src0);
    if var.dtype == DType::Bool {
        buf.iter_mut().for_each(|b| *b = u8::from(*b != 0));
    }
}

/// Whether a chunk's values may be approximations of the values written
/// (SPEC.md 6.6): a stored or constant chunk of a bounded variable may
/// hold values decoded from a bounded stream, or carried over from one by
/// an earlier partial write; only a chunk never written or all fill is
/// known to be exact.
pub(super) fn approximate(entry: &Option<Entry>) -> bool {
    matches!(entry, Some(Entry::Stored { .. } | Entry::Constant { .. }))
}

/// Reduces a chunk's contents to a fill or constant entry (judged on the
/// part inside the variable's extent), or encodes it; `lossless` when its
/// contents may hold approximations already (a bounded codec then stores
/// it losslessly, so that errors never add up).
pub(super) fn prepare(var: &Variable, coords: &[u64], buf: &[u8], lossless: bool) -> Prepared {
    let esize = var.esize();
    let (valid, first) = valid_part(var, coords);
    if block_is_constant(&valid, esize, buf, first) {
        return Prepared::Entry(constant_entry(var, &buf[first * esize..(first + 1) * esize]));
    }
    if var.block_grid().is_none() && matches!(var.codec.compression, Compression::None) && codec::raw_is_memory_form(var.dtype) {
        let (crc, hash) = crate::hash::crc32_xxh64(buf);
        return Prepared::Runs { crc, hash, runs: vec![(0, buf.len())] };
    }
    // A bounded codec keeps the fill value and the no-value marker bit for
    // bit, and stores losslessly what may hold approximations already.
    let bounded = var.is_bounded() && !lossless;
    let exact: Vec<u64> =
        if bounded { std::iter::once(var.fill).chain(var.no_value).map(u64::from_le_bytes).collect() } else { Vec::new() };
    let codec = match var.codec.compression {
        Compression::Bounded { level, .. } if lossless => Codec::zstd(level),
        _ => var.codec,
    };
    let (codec_byte, bytes) = match var.block_grid() {
        Some(grid) => (CODEC_BLOCKS, blocks::encode_chunk(var.dtype, codec, &grid, buf, &exact)),
        None if bounded => {
            let shape: Vec<usize> = var.stored_chunk().iter().map(|&c| c as usize).collect();
            codec::encode_shaped(var.dtype, codec, buf, &shape, &exact)
        }
        None => codec::encode(var.dtype, codec, buf),
    };
    let (crc, hash) = crate::hash::crc32_xxh64(&bytes);
    Prepared::Bytes { codec: codec_byte, bytes, crc, hash }
}
