//! The read path: a region cut into chunks, each found in the write-back
//! buffer, the index or the chunk cache; stored chunks read, checked and
//! decoded (on several cores for large reads) and copied into the caller's
//! buffer.

use super::plan::{chunk_key, cores, fill_chunk, for_each_chunk, pipeline, ChunkPlan, PARALLEL_MIN_BYTES};
use super::{quant, slots, Dataset, VarRef, READ_AHEAD};
use crate::array::{as_bytes_mut, copy_block, fill_block, is_one_run, Element, Order, Region};
use crate::cache::ChunkId;
use crate::codec::{self, blocks, blocks::CODEC_BLOCKS};
use crate::commit::body_start;
use crate::error::{Error, ErrorKind, Result};
use crate::hash::{crc32_xxh64, xxh64};
use crate::index::{Entry, Key};
use crate::spec::{DType, Variable, FEATURE_BOUNDED, FEATURE_ZSTD};
use crate::storage::Storage;
use crate::wire::{self, crc32};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Keys whose index pages a region read over a network fetches together
/// (`Storage::gathers_reads`): a quarter of what one walk may bring into the
/// page cache (`index::CACHE_PAGES`) when each key is in a leaf of its own;
/// a read cut into parts gives each part its share.
const LOOKUP_BATCH: usize = 256;

impl Dataset {
    /// Reads a region of a variable into `out`, laid out in `order`.
    ///
    /// Only the chunks the region overlaps are read; where nothing was
    /// written the variable's fill value is returned.
    ///
    /// # Errors
    /// `TypeMismatch` when `T` is not the variable's type; `InvalidArgument`
    /// or `OutOfRange` for a region that does not fit the variable;
    /// `BufferTooSmall`/`InvalidArgument` when `out` does not have exactly
    /// the region's element count; `Corrupt` or `Io` from the file.
    pub fn read<T: Element>(&self, var: impl VarRef, region: &Region, order: Order, out: &mut [T]) -> Result<()> {
        let v = var.index_in(self)?;
        self.check_type(v, T::DTYPE)?;
        self.read_as(v, 0, None, region, order, as_bytes_mut(out), T::DTYPE)
    }

    /// Reads a region into a new `Vec`.
    ///
    /// # Errors
    /// As [`Dataset::read`], and `OutOfMemory` for a region too large to hold.
    pub fn read_vec<T: Element + Default>(&self, var: impl VarRef, region: &Region, order: Order) -> Result<Vec<T>> {
        let v = var.index_in(self)?;
        self.check_type(v, T::DTYPE)?;
        let n = region.check_within(&self.vars[v].shape, &format_args!("variable {:?}", self.vars[v].name))?;
        let n = wire::to_usize(n, "region element count")?;
        let bytes = wire::mul(n as u64, std::mem::size_of::<T>() as u64, "region byte size")?;
        if bytes > self.memory_limit {
            return Err(Error::new(
                ErrorKind::OutOfMemory,
                format!("a region of {bytes} bytes exceeds the memory limit of {} bytes", self.memory_limit),
            ));
        }
        let mut out = Vec::new();
        out.try_reserve_exact(n).map_err(|_| Error::new(ErrorKind::OutOfMemory, format!("cannot allocate {n} elements")))?;
        out.resize(n, T::default());
        self.read(v, region, order, &mut out)?;
        Ok(out)
    }

    /// [`Dataset::read`] on raw bytes: `out` holds the region's elements in
    /// native byte order (one byte, 0 or 1, per bool).
    ///
    /// # Errors
    /// As [`Dataset::read`], without `TypeMismatch`.
    pub fn read_bytes(&self, var: impl VarRef, region: &Region, order: Order, out: &mut [u8]) -> Result<()> {
        let v = var.index_in(self)?;
        self.read_as(v, 0, None, region, order, out, self.vars[v].dtype)
    }

    /// Reads level `lod` of variable `v` into `out`, holding elements of
    /// `as_type`: the variable's type, or a quantized variable's storage type.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn read_as(
        &self,
        v: usize,
        lod: u8,
        part: Option<u8>,
        region: &Region,
        order: Order,
        out: &mut [u8],
        as_type: DType,
    ) -> Result<()> {
        let layer = self.choose_layer(v, lod, part, region)?;
        let var = &self.vars[v];
        match var.quant {
            Some(q) if as_type != q.storage => {
                let n = self.check_request_as(layer, var.esize(), region, out.len())?;
                let mut ints = Vec::new();
                self.reserve(&mut ints, n * layer.esize(), "the stored integers of a quantized region")?;
                self.read_layer(layer, region, order, &mut ints)?;
                quant::to_values(&q, var.dtype, &ints, out);
                Ok(())
            }
            _ => self.read_layer(layer, region, order, out),
        }
    }

    /// Reads a region of one stored layer (its level's coordinates).
    pub(super) fn read_layer(&self, var: &Variable, region: &Region, order: Order, out: &mut [u8]) -> Result<()> {
        if self.check_request(var, region, out.len())? == 0 {
            return Ok(());
        }
        match self.split_by_chunk_rows(var, region, order, out.len()) {
            Some(parts) => self.read_parts(var, &parts, order, out),
            None => self.read_part(var, region, order, out, true),
        }
    }

    /// A large read cut along its outermost axis (in `order`) at chunk
    /// boundaries into one part per core: each part is a contiguous piece
    /// of the caller's buffer and its own set of chunks, so the cores read,
    /// decode and copy out at once. None when the read is small, strided
    /// along that axis, or spans a single chunk row.
    fn split_by_chunk_rows(&self, var: &Variable, region: &Region, order: Order, bytes: usize) -> Option<Vec<(Region, usize)>> {
        let workers = cores();
        let axis = if order == Order::C { 0 } else { region.ndim() - 1 };
        let (start, count) = (region.start()[axis], region.shape()[axis]);
        if workers < 2 || bytes < 2 * PARALLEL_MIN_BYTES || region.step()[axis] != 1 {
            return None;
        }
        let c = var.chunk[axis];
        let rows = (start + count).div_ceil(c) - start / c;
        if rows < 2 {
            return None;
        }
        let per_index = bytes / count as usize;
        let mut parts = Vec::new();
        let mut from = start;
        for k in 1..=workers as u64 {
            // The first `k` of `workers` shares of the chunk rows end here.
            let to = ((start / c + rows * k / workers as u64) * c).clamp(from, start + count);
            if to > from {
                let mut s = region.start().to_vec();
                let mut n = region.shape().to_vec();
                s[axis] = from;
                n[axis] = to - from;
                parts.push((Region::new(&s, &n).ok()?.with_step(region.step()).ok()?, (to - from) as usize * per_index));
                from = to;
            }
        }
        (parts.len() > 1).then_some(parts)
    }

    /// Reads the parts of [`Dataset::split_by_chunk_rows`] on one thread each.
    fn read_parts(&self, var: &Variable, parts: &[(Region, usize)], order: Order, out: &mut [u8]) -> Result<()> {
        std::thread::scope(|s| {
            let mut rest = out;
            let mut running = Vec::new();
            for (region, len) in parts {
                let (mine, others) = std::mem::take(&mut rest).split_at_mut(*len);
                rest = others;
                running.push(s.spawn(move || self.read_part(var, region, order, mine, false)));
            }
            // Every thread is joined, also after a part fails: a join waits
            // until the thread has exited, thread-locals freed, where the
            // scope's own wait ends when the closure returns.
            let results: Vec<Result<()>> = running
                .into_iter()
                .map(|t| t.join().unwrap_or_else(|_| Err(Error::new(ErrorKind::Internal, "a read thread panicked"))))
                .collect();
            results.into_iter().collect()
        })
    }

    /// Reads a checked region of one layer into `out`, decoding stored chunks
    /// on several cores when `parallel` and there is enough to decode.
    fn read_part(&self, var: &Variable, region: &Region, order: Order, out: &mut [u8], parallel: bool) -> Result<()> {
        let esize = var.esize();
        // Fill and constant chunks are written at once; stored ones are gathered
        // so that those not in the cache can be decoded on several cores.
        let mut stored: Vec<(Vec<u64>, ChunkPlan, Entry)> = Vec::new();
        // Parts of chunks made of blocks, read block by block.
        let mut partial: Vec<(Vec<u64>, ChunkPlan, Entry)> = Vec::new();
        // Over a network, the index pages of the chunks to look up are
        // fetched a batch of keys at a time, a level of the index per
        // request, just before the lookups below find them cached.
        let ahead = if self.storage.gathers_reads() { self.keys_to_look_up(var, region, order)? } else { Vec::new() };
        let mut looked_up = 0;
        // A read cut into parts runs one per core, each with its batches in the one page cache.
        let batch_keys = if parallel { LOOKUP_BATCH } else { (LOOKUP_BATCH / cores()).max(1) };
        for_each_chunk(var, region, order, false, |coords, plan| {
            let key = chunk_key(var, coords);
            if let Some(data) = self.held(&key) {
                copy_block(&plan.spans, esize, data, plan.src0, out, plan.dst0);
                return Ok(());
            }
            if ahead.get(looked_up) == Some(&key) {
                if looked_up % batch_keys == 0 {
                    let batch = &ahead[looked_up..ahead.len().min(looked_up + batch_keys)];
                    self.reader.prefetch_keys(&*self.storage, self.commit.root, batch);
                }
                looked_up += 1;
            }
            match self.entry(&key)? {
                None | Some(Entry::Fill) => fill_block(&plan.dst_spans(), &var.fill[..esize], out, plan.dst0),
                Some(Entry::Constant { value }) => {
                    fill_block(&plan.dst_spans(), &constant_native(var, &value, coords)?[..esize], out, plan.dst0);
                }
                Some(e) if self.read_direct(var, coords, plan, e, out)? => {}
                Some(e) if self.reads_blocks(var, &e, plan) => partial.push((coords.to_vec(), plan.clone(), e)),
                Some(e) => stored.push((coords.to_vec(), plan.clone(), e)),
            }
            Ok(())
        })?;
        let uncached = {
            let cache = self.cache_lock();
            stored.iter().filter(|(_, _, e)| matches!(e, Entry::Stored { slot, offset, length, crc, .. } if !cache.contains(&chunk_id(var, *slot, *offset, *length, *crc)))).count()
        };
        let workers = if !parallel || uncached * var.chunk_elems * esize < PARALLEL_MIN_BYTES { 1 } else { cores().min(uncached) };
        // In windows of at most READ_AHEAD stored bytes, each announced to
        // its storage (Storage::will_read), so that a store over a network
        // fetches a window's chunks at once: the next window while this
        // one is decoded, so that fetching and decoding overlap.
        let windows = read_windows(&stored);
        if let Some(first) = windows.first() {
            self.announce_reads(var, &stored[first.clone()]);
        }
        for (k, range) in windows.iter().enumerate() {
            let window = &stored[range.clone()];
            let next = windows.get(k + 1).map(|r| &stored[r.clone()]);
            std::thread::scope(|scope| {
                let ahead = next.map(|next| scope.spawn(|| self.announce_reads(var, next)));
                let decoded = if workers < 2 {
                    window.iter().try_for_each(|(coords, plan, e)| {
                        let data = self.chunk_data(var, coords, *e)?;
                        copy_block(&plan.spans, esize, &data, plan.src0, out, plan.dst0);
                        Ok(())
                    })
                } else {
                    self.decode_parallel(var, window, workers.min(window.len()), |plan, data| {
                        copy_block(&plan.spans, esize, data, plan.src0, out, plan.dst0)
                    })
                };
                // Joined, as every worker is: the join returns once the
                // thread has exited (its thread-locals freed).
                let fetched =
                    ahead.map_or(Ok(()), |t| t.join().map_err(|_| Error::new(ErrorKind::Internal, "a read-ahead thread panicked")));
                decoded.and(fetched)
            })?;
        }
        if !partial.is_empty() {
            self.read_block_parts(var, &partial, out, parallel)?;
        }
        Ok(())
    }

    /// The keys of a region's chunks that [`Dataset::read_part`] will look
    /// up in the index (neither held in memory nor pending), in the order
    /// it looks them up.
    fn keys_to_look_up(&self, var: &Variable, region: &Region, order: Order) -> Result<Vec<Key>> {
        let mut keys = Vec::new();
        for_each_chunk(var, region, order, false, |coords, _| {
            let key = chunk_key(var, coords);
            if self.held(&key).is_none() && !self.pending.contains_key(&key) {
                keys.push(key);
            }
            Ok(())
        })?;
        Ok(keys)
    }

    /// Tells the storage of each slot which of `stored`'s chunks, not in
    /// the cache, are about to be read.
    fn announce_reads(&self, var: &Variable, stored: &[(Vec<u64>, ChunkPlan, Entry)]) {
        let mut by_slot: BTreeMap<u16, Vec<(u64, u64)>> = BTreeMap::new();
        {
            let cache = self.cache_lock();
            for (_, _, e) in stored {
                if let Entry::Stored { slot, offset, length, crc, .. } = *e {
                    if !cache.contains(&chunk_id(var, slot, offset, length, crc)) {
                        by_slot.entry(slot).or_default().push((offset, u64::from(length)));
                    }
                }
            }
        }
        for (slot, ranges) in by_slot {
            // A slot that cannot be opened is reported by the read that needs it.
            if ranges.len() > 1 && usize::from(slot) <= self.desc.slots.len() {
                if let Ok(storage) = self.slot_storage(slot) {
                    storage.will_read(&ranges);
                }
            }
        }
    }

    /// Reads an uncompressed chunk straight into the caller's buffer when the
    /// whole chunk is one contiguous run there (e.g. a brick read that is
    /// exactly one chunk), checking its CRC32 in place: no intermediate copy.
    /// Returns whether it did.
    fn read_direct(&self, var: &Variable, coords: &[u64], plan: &ChunkPlan, entry: Entry, out: &mut [u8]) -> Result<bool> {
        let Entry::Stored { codec: codec::CODEC_NONE, slot, offset, length, crc, hash } = entry else { return Ok(false) };
        let bytes = var.chunk_elems * var.esize();
        // The stored form is the memory form only for multi-byte little-endian or byte data, not for bits.
        if !codec::raw_is_memory_form(var.dtype)
            || plan.src0 != 0
            || length as usize != bytes
            || !is_one_run(&plan.spans)
            || plan.spans.iter().map(|s| s.count).product::<usize>() != var.chunk_elems
        {
            return Ok(false);
        }
        let id = chunk_id(var, slot, offset, length, crc);
        if usize::from(slot) > self.desc.slots.len() || self.cache_lock().contains(&id) {
            return Ok(false); // the checked path reports a missing slot
        }
        let storage = self.slot_storage(slot)?;
        if self.check_stored_range(&*storage, slot, offset, length)?.is_err() {
            return Ok(false); // the checked path reports it
        }
        let dst = &mut out[plan.dst0 * var.esize()..plan.dst0 * var.esize() + bytes];
        storage.read_at(offset, dst).map_err(|e| Error::io(format!("reading chunk {coords:?} of variable {:?}", var.name), e))?;
        self.count_read(length);
        if let Some(detail) = self.checksum_mismatch(dst, crc, hash) {
            return Err(Error::corrupt(format!("chunk {coords:?} of variable {:?}", var.name), slot, offset, detail));
        }
        Ok(true)
    }

    /// Decodes `stored` chunks on `workers` threads while this thread hands
    /// each decoded chunk to `take` (in completion order). Memory stays
    /// bounded: at most two chunks per worker wait to be taken.
    fn decode_parallel(
        &self,
        var: &Variable,
        stored: &[(Vec<u64>, ChunkPlan, Entry)],
        workers: usize,
        mut take: impl FnMut(&ChunkPlan, &[u8]),
    ) -> Result<()> {
        pipeline(
            stored.len(),
            workers,
            || (),
            |(), i| self.chunk_data(var, &stored[i].0, stored[i].2),
            |i, data| {
                take(&stored[i].1, &data);
                Ok(())
            },
        )
    }

    /// The decoded contents of a stored chunk, from the cache or the file.
    fn chunk_data(&self, var: &Variable, coords: &[u64], entry: Entry) -> Result<Arc<Vec<u8>>> {
        let Entry::Stored { slot, offset, length, crc, .. } = entry else {
            return Err(Error::new(ErrorKind::Internal, "chunk_data on an entry that is not stored"));
        };
        let id = chunk_id(var, slot, offset, length, crc);
        if let Some(c) = self.cache_lock().get(&id) {
            return Ok(c);
        }
        let mut buf = self.cache_lock().take_spare(var.chunk_elems * var.esize());
        self.load_stored(var, coords, entry, &mut buf)?;
        let data = Arc::new(buf);
        self.cache_lock().insert(id, data.clone());
        Ok(data)
    }

    /// The current entry of a chunk: uncommitted writes first, then the committed index.
    pub(super) fn entry(&self, key: &Key) -> Result<Option<Entry>> {
        if let Some(e) = self.pending.get(key) {
            return Ok(*e);
        }
        self.reader.lookup(&*self.storage, self.commit.root, key)
    }

    /// The whole current contents of a chunk, in memory form.
    pub(super) fn load_chunk(&self, var: &Variable, coords: &[u64], buf: &mut Vec<u8>) -> Result<()> {
        let key = chunk_key(var, coords);
        if let Some(data) = self.held(&key) {
            buf.clear();
            buf.extend_from_slice(data);
            return Ok(());
        }
        self.load_entry(var, coords, self.entry(&key)?, buf)
    }

    /// The whole contents of a chunk whose entry is `entry`, in memory form.
    pub(super) fn load_entry(&self, var: &Variable, coords: &[u64], entry: Option<Entry>, buf: &mut Vec<u8>) -> Result<()> {
        match entry {
            None | Some(Entry::Fill) => fill_chunk(var, &var.fill, buf),
            Some(Entry::Constant { value }) => fill_chunk(var, &constant_native(var, &value, coords)?, buf),
            Some(e @ Entry::Stored { .. }) => self.load_stored(var, coords, e, buf)?,
        }
        Ok(())
    }

    /// Reads, checks (CRC32, and XXH64 when recorded) and decodes a stored chunk into `buf`.
    pub(crate) fn load_stored(&self, var: &Variable, coords: &[u64], entry: Entry, buf: &mut Vec<u8>) -> Result<()> {
        let Entry::Stored { codec, slot, offset, length, crc, hash } = entry else {
            return Err(Error::new(ErrorKind::Internal, "load_stored on an entry that is not stored"));
        };
        let object = || format!("chunk {coords:?} of variable {:?}", var.name);
        let bad = |detail: String| Error::corrupt(object(), slot, offset, detail);
        // Everything the entry claims is checked before memory is allocated for
        // it, in this order: lengths against the chunk shape, then against what
        // compression can do, then against the file that holds the bytes.
        let raw = codec::raw_len(var.dtype, var.chunk_elems);
        // Stored bytes are never longer than the raw form (SPEC.md section
        // 6), and a chunk made of blocks than its blocks' raw forms and its
        // table (6.5).
        let grid = if codec == CODEC_BLOCKS {
            Some(var.block_grid().ok_or_else(|| bad(format!("codec byte {codec:#04x} (blocks) in a variable that declares no blocks")))?)
        } else {
            None
        };
        let (min_len, max_len) = grid.as_ref().map_or((1, raw), |g| (g.table_len(), raw + g.table_len()));
        if (length as usize) < min_len || length as usize > max_len {
            return Err(bad(format!("stored length {length} outside {min_len}..={max_len}")));
        }
        // Codec byte 2 is a format 1.3 feature: a file must announce it (SPEC.md 6.3).
        // A bounded variable's lossless fallback is zstd too (SPEC.md 6.6).
        if codec & 0x0f == codec::CODEC_ZSTD && !self.lists_zstd() {
            return Err(bad(format!("codec byte {codec:#04x} (zstd) in a file that does not list the feature \"zstd\"")));
        }
        // Codec byte 3 is a format 1.5 feature (SPEC.md 6.6).
        if codec & 0x0f == codec::CODEC_BOUNDED && !self.desc.features.incompat.iter().any(|f| f == FEATURE_BOUNDED) {
            return Err(bad(format!("codec byte {codec:#04x} (bounded) in a file that does not list the feature \"bounded_codec\"")));
        }
        // No codec expands beyond a fixed ratio: a short entry cannot claim a
        // huge chunk. (A chunk of blocks has a table entry for every block.)
        if grid.is_none() && (raw as u64) > u64::from(length) * codec::max_expansion(codec) + 1024 {
            return Err(bad(format!("{length} stored bytes cannot hold a chunk of {raw} bytes")));
        }
        let storage = self.stored_storage(var, coords, slot, offset)?;
        self.check_stored_range(&*storage, slot, offset, length)?.map_err(bad)?;
        self.reserve(buf, var.chunk_elems * var.esize(), &object())?;
        // An uncompressed chunk whose stored form is its memory form is read
        // straight into the chunk buffer; anything else goes through `stored`.
        let in_place = codec == codec::CODEC_NONE && codec::raw_is_memory_form(var.dtype) && length as usize == buf.len();
        let mut stored = Vec::new();
        if !in_place {
            self.reserve(&mut stored, length as usize, &object())?;
        }
        let target: &mut [u8] = if in_place { buf } else { &mut stored };
        storage.read_at(offset, target).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                bad("chunk lies beyond the end of its file".into())
            } else {
                Error::io(format!("reading {}", object()), e)
            }
        })?;
        self.count_read(length);
        if let Some(detail) = self.checksum_mismatch(target, crc, hash) {
            return Err(bad(detail));
        }
        if in_place {
            return Ok(());
        }
        match grid {
            Some(grid) => blocks::decode_chunk(var.dtype, &grid, &stored, buf, self.lists_zstd(), var.is_bounded()).map_err(bad),
            None => codec::decode(var.dtype, codec, &stored, buf).map_err(bad),
        }
    }

    /// What is wrong with a stored chunk's bytes, if anything: its CRC32, and
    /// its XXH64 when the entry records one (both in one pass over the bytes).
    fn checksum_mismatch(&self, bytes: &[u8], crc: u32, hash: u64) -> Option<String> {
        let (computed, computed_hash) = if hash != 0 && self.records_hashes() { crc32_xxh64(bytes) } else { (crc32(bytes), hash) };
        if computed != crc {
            Some(format!("CRC32 mismatch (stored {crc:#010x}, computed {computed:#010x})"))
        } else if computed_hash != hash {
            Some(format!("XXH64 mismatch (stored {hash:#018x}, computed {computed_hash:#018x})"))
        } else {
            None
        }
    }

    /// Whether the file lists the feature `zstd` (or `bounded_codec`, whose
    /// lossless fallback is zstd), without which a zstd chunk or block is
    /// corrupt (SPEC.md 6.3).
    pub(super) fn lists_zstd(&self) -> bool {
        self.desc.features.incompat.iter().any(|f| f == FEATURE_ZSTD || f == FEATURE_BOUNDED)
    }

    /// The storage of the file slot a stored chunk names; a slot the
    /// dataset does not have is damage in the chunk's entry.
    pub(super) fn stored_storage(&self, var: &Variable, coords: &[u64], slot: u16, offset: u64) -> Result<Arc<dyn Storage>> {
        self.slot_storage(slot).map_err(|e| {
            if e.kind() == ErrorKind::NotFound && slot as usize > self.desc.slots.len() {
                Error::corrupt(
                    format!("chunk {coords:?} of variable {:?}", var.name),
                    slot,
                    offset,
                    format!("file slot {slot} does not exist"),
                )
            } else {
                e
            }
        })
    }

    pub(super) fn count_read(&self, length: u32) {
        self.bytes_read.fetch_add(u64::from(length), std::sync::atomic::Ordering::Relaxed);
    }

    /// Stored chunk bytes this handle has read from its files (chunks found
    /// in the chunk cache do not count) since it was opened: what reads
    /// cost in I/O, for comparing layouts.
    pub fn stored_bytes_read(&self) -> u64 {
        self.bytes_read.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether a stored chunk's bytes lie inside the data of their file: for
    /// the container, inside its body below the committed (or, for this
    /// writer, the written) end; for an external file, below its length.
    /// The inner error describes a range that does not.
    pub(super) fn check_stored_range(
        &self,
        storage: &dyn Storage,
        slot: u16,
        offset: u64,
        length: u32,
    ) -> Result<std::result::Result<(), String>> {
        // An end past 2^64 is damage in the entry, reported as such with the others.
        let Some(end) = offset.checked_add(u64::from(length)) else {
            return Ok(Err(format!("chunk of {length} bytes at offset {offset:#x} would end past 2^64")));
        };
        let file_end = if slot == 0 {
            self.end.max(self.commit.file_len)
        } else {
            storage.len().map_err(|e| Error::io(format!("reading the length of external file slot {slot}"), e))?
        };
        let data_start = match slot {
            0 => body_start(self.commit.head_len),
            s => self.desc.slots.get(usize::from(s) - 1).and_then(slots::id_value).map_or(0, |_| slots::SLOT_HEADER),
        };
        if offset < data_start || end > file_end {
            return Ok(Err(format!("chunk of {length} bytes lies outside the data of its file (which ends at {file_end:#x})")));
        }
        Ok(Ok(()))
    }
}

/// A constant entry's value must be a valid element (for bool: 0 or 1).
pub(super) fn check_constant(var: &Variable, value: &[u8; 8], coords: &[u64]) -> Result<()> {
    if var.dtype == DType::Bool && value[0] > 1 {
        return Err(Error::new(
            ErrorKind::Corrupt,
            format!("corrupt index entry of chunk {coords:?} of variable {:?}: constant bool value {}", var.name, value[0]),
        ));
    }
    Ok(())
}

/// The cache identity of a stored chunk decoded as a chunk of `var`.
/// Deduplication lets variables with other block shapes share the bytes of
/// a chunk made of blocks, which each decodes with its own block grid.
pub(super) fn chunk_id(var: &Variable, slot: u16, offset: u64, length: u32, crc: u32) -> ChunkId {
    let dtype = DType::ALL.iter().position(|&d| d == var.dtype).unwrap_or(0) as u8;
    let grid = var.blocks.as_ref().map_or(0, |b| {
        let shapes: Vec<u8> = var.chunk.iter().chain(b).flat_map(|n| n.to_le_bytes()).collect();
        xxh64(&shapes) | 1
    });
    (slot, offset, length, crc, dtype, var.chunk_elems, grid)
}

/// A constant entry's value as one native-order element, checked.
fn constant_native(var: &Variable, value: &[u8; 8], coords: &[u64]) -> Result<[u8; 8]> {
    check_constant(var, value, coords)?;
    let mut v = *value;
    codec::le_to_native(&mut v[..var.esize()], var.esize());
    Ok(v)
}

/// `stored` cut into consecutive windows of at most READ_AHEAD stored bytes
/// (at least one chunk each).
fn read_windows(stored: &[(Vec<u64>, ChunkPlan, Entry)]) -> Vec<std::ops::Range<usize>> {
    let mut windows = Vec::new();
    let mut from = 0;
    while from < stored.len() {
        let mut to = from;
        let mut bytes = 0u64;
        while to < stored.len() && (to == from || bytes < READ_AHEAD) {
            if let Entry::Stored { length, .. } = stored[to].2 {
                bytes += u64::from(length);
            }
            to += 1;
        }
        windows.push(from..to);
        from = to;
    }
    windows
}
