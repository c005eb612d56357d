//! How a region meets the chunk grid: chunk keys, the part of a region
//! each chunk holds (its plan), the valid part of edge chunks, and the
//! pipeline that spreads codec work over the cores.

use crate::array::{fill_block, strides, strides_into, Order, Region, Span};
use crate::error::{Error, ErrorKind, Result};
use crate::index::Key;
use crate::spec::{Variable, MAX_DIMS};
use crate::wire::{self};

pub(super) fn chunk_key(var: &Variable, coords: &[u64]) -> Key {
    let mut c = [0u32; 8];
    for (d, &x) in coords.iter().enumerate() {
        // Chunk coordinates are below the grid extent, which validation keeps under 2^32.
        c[d] = x as u32;
    }
    Key { layer: Key::layer_of(var.index) | u32::from(var.layer_id), coords: c }
}

/// The spans of a chunk's valid part (inside the variable's extent, margins
/// included), for the chunk in memory, and the element where it starts.
pub(super) fn valid_part(var: &Variable, coords: &[u64]) -> (Vec<Span>, usize) {
    let cdims: Vec<usize> = var.stored_chunk().iter().map(|&c| c as usize).collect();
    let cst = strides(&cdims, Order::C);
    let [mn, mp] = var.margin;
    let mut first = 0;
    let spans = (0..coords.len())
        .map(|d| {
            let box_start = (coords[d] * var.chunk[d]).saturating_sub(mn);
            let box_end = (coords[d] * var.chunk[d] + var.chunk[d] + mp).min(var.shape[d]);
            first += (box_start + mn - coords[d] * var.chunk[d]) as usize * cst[d];
            Span { count: (box_end - box_start) as usize, src: cst[d], dst: 0 }
        })
        .collect();
    (spans, first)
}

/// Runs `work(state, i)` for every `i` in `0..n` on `workers` threads (each
/// with its own `state` from `init`) while this thread hands each result to
/// `take`, in completion order. At most two results per worker wait, so
/// memory stays bounded. After the first failure of `work` or `take`, the
/// remaining items are skipped and that failure is returned.
pub(super) fn pipeline<S, T: Send>(
    n: usize,
    workers: usize,
    init: impl Fn() -> S + Sync,
    work: impl Fn(&mut S, usize) -> Result<T> + Sync,
    mut take: impl FnMut(usize, T) -> Result<()>,
) -> Result<()> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<(usize, Result<T>)>(2 * workers);
        let mut threads = Vec::with_capacity(workers);
        for _ in 0..workers {
            let tx = tx.clone();
            let (next, stop, init, work) = (&next, &stop, &init, &work);
            threads.push(s.spawn(move || {
                let mut state = init();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n || stop.load(Ordering::Relaxed) || tx.send((i, work(&mut state, i))).is_err() {
                        return;
                    }
                }
            }));
        }
        drop(tx);
        let mut first_error = None;
        for (i, r) in rx {
            if first_error.is_some() {
                continue; // drain, so that no worker blocks on a full channel
            }
            if let Err(e) = r.and_then(|t| take(i, t)) {
                stop.store(true, Ordering::Relaxed);
                first_error = Some(e);
            }
        }
        // Joined one by one: a join returns once the thread has exited (its
        // thread-locals freed), where the scope's own wait ends earlier. A
        // worker that panicked never sent its item, so that is an error.
        for t in threads {
            if t.join().is_err() && first_error.is_none() {
                first_error = Some(Error::new(ErrorKind::Internal, "a worker thread panicked"));
            }
        }
        first_error.map_or(Ok(()), Err)
    })
}

/// Chunk buffers handed between the threads of a [`pipeline`] and reused:
/// a buffer taken by a worker comes back once its chunk is stored, so that
/// each chunk does not cost a fresh allocation (for large chunks, fresh
/// zeroed pages from the kernel). Holds no more buffers than were in
/// flight at once, which the pipeline bounds.
pub(super) struct Buffers {
    bytes: usize,
    /// What the buffers hold, for the error when they cannot be had.
    what: &'static str,
    free: std::sync::Mutex<Vec<Vec<u8>>>,
}

impl Buffers {
    /// A pool of buffers of `bytes` bytes each, holding `what`; none is
    /// made if `bytes` exceeds `memory_limit`.
    pub(super) fn new(bytes: usize, memory_limit: u64, what: &'static str) -> Result<Self> {
        within_limit(bytes, memory_limit, what)?;
        Ok(Buffers { bytes, what, free: std::sync::Mutex::new(Vec::new()) })
    }

    /// A buffer of the pool's size, with whatever contents it held last.
    pub(super) fn take(&self) -> Result<Vec<u8>> {
        if let Some(buf) = self.free.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop() {
            return Ok(buf);
        }
        let mut buf = Vec::new();
        zeroed(&mut buf, self.bytes, self.what)?;
        Ok(buf)
    }

    /// Returns a buffer to the pool (one of another size is dropped).
    pub(super) fn give(&self, buf: Vec<u8>) {
        if buf.len() == self.bytes {
            self.free.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(buf);
        }
    }
}

/// Refuses a buffer of `bytes` bytes for `what` beyond `memory_limit`.
pub(super) fn within_limit(bytes: usize, memory_limit: u64, what: &str) -> Result<()> {
    if bytes as u64 > memory_limit {
        return Err(Error::new(
            ErrorKind::OutOfMemory,
            format!("{what} needs {bytes} bytes, more than the memory limit of {memory_limit} bytes"),
        ));
    }
    Ok(())
}

/// Makes `buf` (emptied) `bytes` zero bytes, or fails with `OutOfMemory`
/// naming `what` when they cannot be allocated.
pub(super) fn zeroed(buf: &mut Vec<u8>, bytes: usize, what: &str) -> Result<()> {
    buf.clear();
    buf.try_reserve_exact(bytes).map_err(|_| Error::new(ErrorKind::OutOfMemory, format!("cannot allocate {bytes} bytes for {what}")))?;
    buf.resize(bytes, 0);
    Ok(())
}

/// Sets every element of a chunk buffer to `value` (one element, native order).
pub(super) fn fill_chunk(var: &Variable, value: &[u8], buf: &mut [u8]) {
    fill_block(&[Span { count: var.chunk_elems, src: 0, dst: 1 }], &value[..var.esize()], buf, 0);
}

/// The number of cores to spread codec work over (asked once: on Linux the
/// answer takes a dozen system calls).
pub(super) fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get))
}

/// Below this many bytes of chunks to decode, one thread does it all.
pub(super) const PARALLEL_MIN_BYTES: usize = 1 << 20;

/// How one chunk and a region meet.
#[derive(Clone)]
pub(super) struct ChunkPlan {
    /// Per axis: count, stride in the chunk (`src`), stride in the caller's buffer (`dst`).
    pub(super) spans: Vec<Span>,
    /// Element offset of the first selected element in the chunk.
    pub(super) src0: usize,
    /// Element offset of that element in the caller's buffer.
    pub(super) dst0: usize,
    /// Whether the region covers every valid element of the chunk.
    pub(super) covers_chunk: bool,
}

impl ChunkPlan {
    pub(super) fn dst_spans(&self) -> Vec<Span> {
        self.spans.iter().map(|s| Span { count: s.count, src: 0, dst: s.dst }).collect()
    }
}

/// Calls `f` for every chunk that holds at least one element of `region`:
/// in its own box when reading (`padded` false), or anywhere in the box
/// its margins extend (`padded` true, for writes, which must reach every
/// copy of a sample). Chunk-local positions count from the start of the
/// margin.
pub(super) fn for_each_chunk(
    var: &Variable,
    region: &Region,
    order: Order,
    padded: bool,
    mut f: impl FnMut(&[u64], &ChunkPlan) -> Result<()>,
) -> Result<()> {
    let n = var.shape.len();
    let (start, shape, step) = (region.start(), region.shape(), region.step());
    if n > MAX_DIMS || [start.len(), shape.len(), step.len(), var.chunk.len(), var.grid.len()].iter().any(|&l| l != n) {
        return Err(Error::new(ErrorKind::Internal, format!("a region of {} axes over a variable of {n}", shape.len())));
    }
    let [mn, mp] = var.margin;
    let (ext_lo, ext_hi) = if padded { (mn, mp) } else { (0, 0) };
    // Sizes below are bounded by the chunk size (<= 256 MiB) or the caller's buffer, so they fit usize.
    // At most MAX_DIMS axes: on the stack, since small reads come here once each.
    let (mut cdims, mut cst, mut bdims, mut bst) = ([0usize; MAX_DIMS], [0usize; MAX_DIMS], [0usize; MAX_DIMS], [0usize; MAX_DIMS]);
    let (mut lo, mut hi) = ([0u64; MAX_DIMS], [0u64; MAX_DIMS]);
    for d in 0..n {
        cdims[d] = var.stored_extent(d) as usize;
        bdims[d] = shape[d] as usize;
        lo[d] = start[d].saturating_sub(ext_hi) / var.chunk[d];
        hi[d] = ((start[d] + (shape[d] - 1) * step[d] + ext_lo) / var.chunk[d]).min(var.grid[d] - 1);
    }
    // The first chunk at or after `c` along axis `d` whose box holds a sample
    // of the region: a step longer than a chunk skips chunks, and the walk
    // below visits only chunks that hold something, so that its cost follows
    // what is read, not the grid the region spans.
    let touched = |d: usize, c: u64| -> Option<u64> {
        let chunk = var.chunk[d];
        if c > hi[d] {
            return None;
        }
        let c0 = (c * chunk).saturating_sub(ext_lo);
        let i = if c0 <= start[d] { 0 } else { wire::div_ceil(c0 - start[d], step[d]) };
        if i >= shape[d] {
            return None;
        }
        let s = start[d] + i * step[d];
        // The first chunk whose box, [k * chunk - ext_lo, (k + 1) * chunk + ext_hi), reaches past s.
        let k = (s + 1).checked_sub(chunk.saturating_add(ext_hi)).map_or(0, |x| wire::div_ceil(x, chunk)).max(c);
        (k <= hi[d]).then_some(k)
    };
    for (d, first) in lo[..n].iter_mut().enumerate() {
        match touched(d, *first) {
            Some(c) => *first = c,
            None => return Ok(()),
        }
    }
    let (cdims, bdims, lo) = (&cdims[..n], &bdims[..n], &lo[..n]);
    strides_into(cdims, Order::C, &mut cst[..n]);
    strides_into(bdims, order, &mut bst[..n]);
    let mut coords_buf = [0u64; MAX_DIMS];
    let coords = &mut coords_buf[..n];
    coords.copy_from_slice(lo);
    let mut spans = vec![Span { count: 0, src: 0, dst: 0 }; n];
    'chunks: loop {
        let (mut src0, mut dst0, mut covers) = (0usize, 0usize, true);
        let mut empty = false;
        for d in 0..n {
            // The box this chunk serves, within the extent, and where its stored copy starts.
            let origin = (coords[d] * var.chunk[d]) as i128 - mn as i128;
            let c0 = (coords[d] * var.chunk[d]).saturating_sub(ext_lo);
            let c_end = (coords[d] * var.chunk[d] + var.chunk[d] + ext_hi).min(var.shape[d]); // exclusive
                                                                                              // First and last region index i whose sample start + i*step lies in [c0, c_end).
            let i_lo = if c0 <= start[d] { 0 } else { wire::div_ceil(c0 - start[d], step[d]) };
            let i_hi = ((c_end - 1).saturating_sub(start[d]) / step[d]).min(shape[d] - 1);
            if c_end <= start[d] || i_lo > i_hi {
                empty = true;
                break;
            }
            let count = i_hi - i_lo + 1;
            let first = start[d] + i_lo * step[d];
            // A step larger than the extent takes one sample, whose stride is
            // never used: it may exceed usize, so it saturates (with two
            // samples or more, step * stride is below the layer's extent).
            spans[d] = Span { count: count as usize, src: (step[d] as usize).saturating_mul(cst[d]), dst: bst[d] };
            src0 += (first as i128 - origin) as usize * cst[d];
            dst0 += i_lo as usize * bst[d];
            covers &= step[d] == 1 && first == c0 && count == c_end - c0;
        }
        if !empty {
            f(coords, &ChunkPlan { spans: spans.clone(), src0, dst0, covers_chunk: covers })?;
        }
        // Next chunk, last axis fastest.
        let mut d = n;
        loop {
            if d == 0 {
                break 'chunks;
            }
            d -= 1;
            if let Some(c) = touched(d, coords[d] + 1) {
                coords[d] = c;
                break;
            }
            coords[d] = lo[d];
        }
    }
    Ok(())
}
