//! Partial reads of chunks made of blocks (SPEC.md 6.5): for a region that
//! covers part of such a chunk, only the block table and the blocks the
//! region overlaps are read (adjacent blocks in one read), checked and
//! decoded; tables and decoded blocks are kept in the chunk cache.

use super::plan::{cores, pipeline, ChunkPlan, PARALLEL_MIN_BYTES};
use super::read::chunk_id;
use super::Dataset;
use crate::array::{copy_block, fill_block, strides, Order, Span};
use crate::cache::ChunkId;
use crate::codec::blocks::{decode_block, parse_table, Block, BlockGrid, CODEC_BLOCKS};
use crate::codec::{le_to_native, raw_len};
use crate::error::{Error, ErrorKind, Result};
use crate::index::Entry;
use crate::spec::{DType, Variable};
use std::sync::Arc;

/// The element-type byte of a cache identity that marks a block table
/// (data types use the positions of `DType::ALL`).
const TABLE_IN_CACHE: u8 = 0xfe;

/// A block a read needs, decoded.
enum Fetched {
    Values(Arc<Vec<u8>>),
    Constant([u8; 8]),
}

/// The part of a region in one chunk, per axis: first chunk-local index,
/// step and count.
struct LocalBox {
    first: Vec<usize>,
    step: Vec<usize>,
    count: Vec<usize>,
}

impl LocalBox {
    fn of(var: &Variable, plan: &ChunkPlan) -> LocalBox {
        let chunk: Vec<usize> = var.chunk.iter().map(|&c| c as usize).collect();
        let cst = strides(&chunk, Order::C);
        LocalBox {
            first: (0..chunk.len()).map(|d| (plan.src0 / cst[d]) % chunk[d]).collect(),
            step: (0..chunk.len()).map(|d| (plan.spans[d].src / cst[d]).max(1)).collect(),
            count: plan.spans.iter().map(|s| s.count).collect(),
        }
    }

    /// The range of region indices along axis `d` that fall in `[lo, hi)`, if any.
    fn indices_in(&self, d: usize, lo: usize, hi: usize) -> Option<(usize, usize)> {
        let (f, s, n) = (self.first[d], self.step[d], self.count[d]);
        let i_lo = if lo <= f { 0 } else { (lo - f).div_ceil(s) };
        if hi <= f || i_lo >= n {
            return None;
        }
        let i_hi = ((hi - 1 - f) / s).min(n - 1);
        (i_lo <= i_hi).then_some((i_lo, i_hi))
    }

    /// The blocks of `grid` that hold at least one element of the box, in C order.
    fn blocks(&self, grid: &BlockGrid) -> Vec<usize> {
        let b = grid.block_shape();
        let per_axis: Vec<Vec<usize>> = (0..b.len())
            .map(|d| {
                let last = self.first[d] + (self.count[d] - 1) * self.step[d];
                (self.first[d] / b[d]..=last / b[d]).filter(|&g| self.indices_in(d, g * b[d], (g + 1) * b[d]).is_some()).collect()
            })
            .collect();
        let mut out = Vec::new();
        let mut pos = vec![0usize; b.len()];
        'all: loop {
            let at: Vec<usize> = pos.iter().enumerate().map(|(d, &k)| per_axis[d][k]).collect();
            out.push(grid.index_of(&at));
            let mut d = b.len();
            loop {
                if d == 0 {
                    break 'all;
                }
                d -= 1;
                pos[d] += 1;
                if pos[d] < per_axis[d].len() {
                    break;
                }
                pos[d] = 0;
            }
        }
        out
    }

    /// Spans and first elements copying the box's part of block `i` (its
    /// memory form) into the caller's buffer.
    fn copy_plan(&self, grid: &BlockGrid, i: usize, plan: &ChunkPlan) -> Option<(Vec<Span>, usize, usize)> {
        let (origin, extent) = grid.block_box(i);
        let bst = strides(&extent, Order::C);
        let (mut src0, mut dst0) = (0, plan.dst0);
        let mut spans = Vec::with_capacity(extent.len());
        for d in 0..extent.len() {
            let (i_lo, i_hi) = self.indices_in(d, origin[d], origin[d] + extent[d])?;
            spans.push(Span { count: i_hi - i_lo + 1, src: self.step[d].saturating_mul(bst[d]), dst: plan.spans[d].dst });
            src0 += (self.first[d] + i_lo * self.step[d] - origin[d]) * bst[d];
            dst0 += i_lo * plan.spans[d].dst;
        }
        Some((spans, src0, dst0))
    }
}

impl Dataset {
    /// Whether `plan`'s part of a stored chunk is read block by block: the
    /// chunk is made of blocks, the region covers only part of it, and the
    /// whole chunk is not in the cache already.
    pub(super) fn reads_blocks(&self, var: &Variable, entry: &Entry, plan: &ChunkPlan) -> bool {
        let Entry::Stored { codec: CODEC_BLOCKS, slot, offset, length, crc, .. } = *entry else { return false };
        var.blocks.is_some() && !plan.covers_chunk && !self.cache_lock().contains(&chunk_id(var, slot, offset, length, crc))
    }

    /// Reads the parts of chunks made of blocks that `parts` name into
    /// `out`, on several cores when there is enough to decode.
    pub(super) fn read_block_parts(
        &self,
        var: &Variable,
        parts: &[(Vec<u64>, ChunkPlan, Entry)],
        out: &mut [u8],
        parallel: bool,
    ) -> Result<()> {
        let esize = var.esize();
        let copy = |plan: &ChunkPlan, fetched: &[(usize, Fetched)], out: &mut [u8]| {
            let grid = var.block_grid();
            let Some(grid) = grid else { return };
            let local = LocalBox::of(var, plan);
            for (i, f) in fetched {
                let Some((spans, src0, dst0)) = local.copy_plan(&grid, *i, plan) else { continue };
                match f {
                    Fetched::Values(data) => copy_block(&spans, esize, data, src0, out, dst0),
                    Fetched::Constant(v) => {
                        let dst: Vec<Span> = spans.iter().map(|s| Span { count: s.count, src: 0, dst: s.dst }).collect();
                        fill_block(&dst, &v[..esize], out, dst0);
                    }
                }
            }
        };
        let bytes: usize = parts.len() * var.block_shape().map_or(0, |b| b.iter().product::<u64>() as usize) * esize;
        let workers = if !parallel || bytes < PARALLEL_MIN_BYTES { 1 } else { cores().min(parts.len()) };
        if workers < 2 {
            for (coords, plan, entry) in parts {
                let fetched = self.fetch_blocks(var, coords, plan, *entry)?;
                copy(plan, &fetched, out);
            }
            return Ok(());
        }
        pipeline(
            parts.len(),
            workers,
            || (),
            |(), i| self.fetch_blocks(var, &parts[i].0, &parts[i].1, parts[i].2),
            |i, fetched| {
                copy(&parts[i].1, &fetched, out);
                Ok(())
            },
        )
    }

    /// The decoded blocks of a stored chunk that `plan`'s part of a region
    /// overlaps, from the cache or read (adjacent ones together) and checked.
    fn fetch_blocks(&self, var: &Variable, coords: &[u64], plan: &ChunkPlan, entry: Entry) -> Result<Vec<(usize, Fetched)>> {
        let Entry::Stored { slot, offset, length, crc, .. } = entry else {
            return Err(Error::new(ErrorKind::Internal, "fetch_blocks on an entry that is not stored"));
        };
        let grid = var.block_grid().ok_or_else(|| Error::new(ErrorKind::Internal, "fetch_blocks on a variable without blocks"))?;
        let object = || format!("chunk {coords:?} of variable {:?}", var.name);
        let bad = |detail: String| Error::corrupt(object(), slot, offset, detail);
        let table_len = grid.table_len();
        let raw = raw_len(var.dtype, var.chunk_elems);
        if (length as usize) < table_len || length as usize > raw + table_len {
            return Err(bad(format!("stored length {length} outside {table_len}..={} for a chunk made of blocks", raw + table_len)));
        }
        let storage = self.stored_storage(var, coords, slot, offset)?;
        self.check_stored_range(&*storage, slot, offset, length)?.map_err(bad)?;
        let io = |e: std::io::Error| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                bad("chunk lies beyond the end of its file".into())
            } else {
                Error::io(format!("reading {}", object()), e)
            }
        };
        // The table, cached under the chunk's identity.
        let table_id: ChunkId = (slot, offset, length, crc, TABLE_IN_CACHE, 0, 0);
        let cached = self.cache_lock().get(&table_id);
        let table = match cached {
            Some(t) => t,
            None => {
                let mut t = Vec::new();
                self.reserve(&mut t, table_len, &object())?;
                storage.read_at(offset, &mut t).map_err(io)?;
                self.count_read(table_len as u32);
                let t = Arc::new(t);
                self.cache_lock().insert(table_id, t.clone());
                t
            }
        };
        let blocks = parse_table(&grid, var.dtype, &table, u64::from(length), self.lists_zstd(), var.is_bounded()).map_err(&bad)?;
        let wanted = LocalBox::of(var, plan).blocks(&grid);
        let dtype_byte = DType::ALL.iter().position(|&d| d == var.dtype).unwrap_or(0) as u8;
        let block_id = |i: usize| match blocks[i] {
            Block::Stored { offset: at, length: len, crc: c, .. } => {
                Some((slot, offset + at, len, c, dtype_byte, grid.block_box(i).1.iter().product::<usize>(), 0))
            }
            Block::Constant { .. } => None,
        };
        let mut fetched = Vec::with_capacity(wanted.len());
        let mut missing = Vec::new();
        {
            let cache = self.cache_lock();
            for &i in &wanted {
                match blocks[i] {
                    Block::Constant { value } => {
                        let mut v = value;
                        le_to_native(&mut v[..var.esize()], var.esize());
                        fetched.push((i, Fetched::Constant(v)));
                    }
                    Block::Stored { .. } => match block_id(i).and_then(|id| cache.get(&id)) {
                        Some(data) => fetched.push((i, Fetched::Values(data))),
                        None => missing.push(i),
                    },
                }
            }
        }
        if missing.is_empty() {
            return Ok(fetched);
        }
        // One read per run of adjacent blocks (they are stored in C order).
        let range = |i: usize| match blocks[i] {
            Block::Stored { offset: at, length: len, .. } => (at, u64::from(len)),
            Block::Constant { .. } => (0, 0),
        };
        let mut runs: Vec<(u64, u64, Vec<usize>)> = Vec::new();
        for &i in &missing {
            let (at, len) = range(i);
            match runs.last_mut() {
                Some((start, n, members)) if *start + *n == at => {
                    *n += len;
                    members.push(i);
                }
                _ => runs.push((at, len, vec![i])),
            }
        }
        let total: u64 = runs.iter().map(|r| r.1).sum();
        let mut bufs: Vec<Vec<u8>> = Vec::with_capacity(runs.len());
        for r in &runs {
            let mut b = Vec::new();
            self.reserve(&mut b, r.1 as usize, &object())?;
            bufs.push(b);
        }
        {
            let mut reads: Vec<(u64, &mut [u8])> = runs.iter().zip(bufs.iter_mut()).map(|(r, b)| (offset + r.0, &mut b[..])).collect();
            storage.read_many(&mut reads).map_err(io)?;
        }
        self.count_read(total as u32);
        for ((start, _, members), buf) in runs.iter().zip(&bufs) {
            for &i in members {
                let (at, len) = range(i);
                let bytes = &buf[(at - start) as usize..(at - start + len) as usize];
                let mut out = Vec::new();
                self.reserve(&mut out, grid.block_box(i).1.iter().product::<usize>() * var.esize(), &object())?;
                decode_block(var.dtype, i, &blocks[i], bytes, &mut out).map_err(&bad)?;
                let data = Arc::new(out);
                if let Some(id) = block_id(i) {
                    self.cache_lock().insert(id, data.clone());
                }
                fetched.push((i, Fetched::Values(data)));
            }
        }
        Ok(fetched)
    }
}
