//! Regions, memory orders, typed elements and the strided copy between a
//! chunk and a caller's buffer.

use crate::error::{invalid, Result};
use crate::spec::{DType, MAX_DIMS};
use crate::wire;

/// The memory order of a caller's buffer.
///
/// On disk, chunks are always in C order (SPEC.md section 2); the order here
/// only says how the caller's buffer is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Row-major: the last axis varies fastest (NumPy's default, HDF5, Zarr).
    C,
    /// Column-major: the first axis varies fastest (Fortran, RESQML, OpenVDS).
    Fortran,
}

/// A rectangular, optionally strided, selection of a variable: along axis
/// `d` it takes `shape[d]` samples at `start[d]`, `start[d] + step[d]`, ...
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region {
    start: Vec<u64>,
    shape: Vec<u64>,
    step: Vec<u64>,
}

impl Region {
    /// A region of `shape` samples from `start`, step 1.
    ///
    /// # Errors
    /// `InvalidArgument` when the lengths differ or are not 1 to 8.
    pub fn new(start: &[u64], shape: &[u64]) -> Result<Region> {
        if start.len() != shape.len() || start.is_empty() || start.len() > MAX_DIMS {
            return Err(invalid(format!(
                "region start has {} values and shape {}; both must have the same length, 1 to {MAX_DIMS}",
                start.len(),
                shape.len()
            )));
        }
        Ok(Region { start: start.to_vec(), shape: shape.to_vec(), step: vec![1; start.len()] })
    }

    /// The whole of a variable of the given shape.
    ///
    /// # Errors
    /// `InvalidArgument` when `shape` has not 1 to 8 values.
    pub fn full(shape: &[u64]) -> Result<Region> {
        Region::new(&vec![0; shape.len()], shape)
    }

    /// The same region taking every `step[d]`-th sample along axis `d`.
    ///
    /// # Errors
    /// `InvalidArgument` when `step` has the wrong length or a zero.
    pub fn with_step(mut self, step: &[u64]) -> Result<Region> {
        if step.len() != self.start.len() || step.contains(&0) {
            return Err(invalid(format!("region step {step:?} must have {} values, each at least 1", self.start.len())));
        }
        self.step = step.to_vec();
        Ok(self)
    }

    /// First sample along each axis.
    pub fn start(&self) -> &[u64] {
        &self.start
    }
    /// Samples taken along each axis.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }
    /// Distance between samples along each axis.
    pub fn step(&self) -> &[u64] {
        &self.step
    }
    /// Number of dimensions.
    pub fn ndim(&self) -> usize {
        self.start.len()
    }

    /// Checks the region against a variable's extent and returns its element count.
    pub(crate) fn check_within(&self, extent: &[u64], what: &dyn std::fmt::Display) -> Result<u64> {
        if self.ndim() != extent.len() {
            return Err(invalid(format!("{what} has {} dimensions but the region has {}", extent.len(), self.ndim())));
        }
        for (d, &n) in extent.iter().enumerate() {
            if self.shape[d] == 0 {
                continue;
            }
            let span = wire::mul(self.shape[d] - 1, self.step[d], "region extent")?;
            let last = wire::add(self.start[d], span, "region end")?;
            if last >= n {
                return Err(crate::Error::new(
                    crate::ErrorKind::OutOfRange,
                    format!(
                        "region along axis {d} (start {}, {} samples, step {}) ends at index {last}, beyond the extent {} of {what}",
                        self.start[d], self.shape[d], self.step[d], n
                    ),
                ));
            }
        }
        wire::product(&self.shape, "region element count")
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type that is the in-memory form of a data type.
///
/// Implemented for `i8`..`i64`, `u8`..`u64`, `f32`, `f64` and `bool`.
/// Buffers of these types are checked against a variable's [`DType`] before
/// any byte moves.
pub trait Element: Copy + sealed::Sealed + 'static {
    /// The data type this Rust type holds.
    const DTYPE: DType;
}

macro_rules! element {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t { const DTYPE: DType = DType::$d; }
    )*};
}
element!(i8 => Int8, i16 => Int16, i32 => Int32, i64 => Int64, u8 => UInt8, u16 => UInt16,
         u32 => UInt32, u64 => UInt64, f32 => Float32, f64 => Float64, bool => Bool);

/// The bytes of a typed buffer.
pub(crate) fn as_bytes<T: Element>(s: &[T]) -> &[u8] {
    // SAFETY: every Element is a primitive without padding, so all of its
    // bytes are initialized; the length covers exactly the slice's memory.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

/// The bytes of a typed buffer, writable.
///
/// Callers may only store valid element bit patterns: any bytes for the
/// numeric types, and only 0 or 1 for `bool` (the chunk decoder produces
/// only those).
pub(crate) fn as_bytes_mut<T: Element>(s: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `as_bytes`; in addition the crate writes only 0 or 1
    // into bool elements, so every element stays a valid value of T.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

/// One axis of a strided copy: `count` elements, strides in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    pub count: usize,
    pub src: usize,
    pub dst: usize,
}

/// Whether the block is one run contiguous on both sides (after merging axes).
pub(crate) fn is_one_run(spans: &[Span]) -> bool {
    let c = coalesce(spans);
    c.len() == 1 && c[0].src == 1 && c[0].dst == 1
}

/// Merges adjacent axes that are contiguous in both source and destination,
/// so that a whole matching block becomes one run. Spans are outermost first.
fn coalesce(spans: &[Span]) -> Vec<Span> {
    let mut out: Vec<Span> = Vec::with_capacity(spans.len());
    for s in spans.iter().rev() {
        if s.count == 1 {
            continue;
        }
        match out.last_mut() {
            Some(inner) if s.src == inner.count * inner.src && s.dst == inner.count * inner.dst => inner.count *= s.count,
            _ => out.push(*s),
        }
    }
    if out.is_empty() {
        out.push(Span { count: 1, src: 1, dst: 1 });
    }
    out.reverse();
    out
}

/// Calls `f(src_offset, dst_offset, inner)` for each innermost run, offsets in elements.
fn for_each_run(spans: &[Span], src0: usize, dst0: usize, mut f: impl FnMut(usize, usize, &Span)) {
    let (outer, inner) = spans.split_at(spans.len() - 1);
    let inner = &inner[0];
    if outer.iter().any(|s| s.count == 0) || inner.count == 0 {
        return;
    }
    let mut idx = [0usize; MAX_DIMS];
    let (mut s, mut d) = (src0, dst0);
    loop {
        f(s, d, inner);
        // Odometer over the outer axes, innermost of them first.
        let mut k = outer.len();
        loop {
            if k == 0 {
                return;
            }
            k -= 1;
            idx[k] += 1;
            s += outer[k].src;
            d += outer[k].dst;
            if idx[k] < outer[k].count {
                break;
            }
            s -= outer[k].src * outer[k].count;
            d -= outer[k].dst * outer[k].count;
            idx[k] = 0;
        }
    }
}

/// The byte ranges (offset, length) of a source that a strided copy reads,
/// in order, when they fill the destination from `dst0` on one after
/// another, each contiguous on both sides and at least `min_bytes` long:
/// the destination is then those ranges joined, and need not be made.
/// None when the copy is not of that form.
pub(crate) fn contiguous_runs(spans: &[Span], esize: usize, src0: usize, dst0: usize, min_bytes: usize) -> Option<Vec<(usize, usize)>> {
    let spans = coalesce(spans);
    let inner = spans[spans.len() - 1];
    let run = inner.count * esize;
    if inner.src != 1 || inner.dst != 1 || run < min_bytes {
        return None;
    }
    let mut runs = Vec::with_capacity(spans[..spans.len() - 1].iter().map(|s| s.count).product());
    let mut next = dst0;
    let mut consecutive = true;
    for_each_run(&spans, src0, dst0, |s, d, inner| {
        consecutive &= d == next;
        next = d + inner.count;
        runs.push((s * esize, run));
    });
    consecutive.then_some(runs)
}

/// Copies a strided block of `esize`-byte elements from `src` to `dst`.
/// Runs contiguous on both sides move as one `copy_from_slice`.
pub(crate) fn copy_block(spans: &[Span], esize: usize, src: &[u8], src0: usize, dst: &mut [u8], dst0: usize) {
    let spans = coalesce(spans);
    for_each_run(&spans, src0, dst0, |s, d, inner| {
        if inner.src == 1 && inner.dst == 1 {
            let n = inner.count * esize;
            dst[d * esize..d * esize + n].copy_from_slice(&src[s * esize..s * esize + n]);
        } else {
            // One element at a time: with the size known at compile time each
            // copy is a load and a store, not a call to memcpy.
            match esize {
                1 => copy_strided::<1>(inner, src, s, dst, d),
                2 => copy_strided::<2>(inner, src, s, dst, d),
                4 => copy_strided::<4>(inner, src, s, dst, d),
                8 => copy_strided::<8>(inner, src, s, dst, d),
                _ => {
                    for i in 0..inner.count {
                        let (a, b) = ((s + i * inner.src) * esize, (d + i * inner.dst) * esize);
                        dst[b..b + esize].copy_from_slice(&src[a..a + esize]);
                    }
                }
            }
        }
    });
}

/// The elements of one strided run of `N`-byte elements (offsets in elements).
fn copy_strided<const N: usize>(inner: &Span, src: &[u8], s: usize, dst: &mut [u8], d: usize) {
    for i in 0..inner.count {
        let (a, b) = ((s + i * inner.src) * N, (d + i * inner.dst) * N);
        dst[b..b + N].copy_from_slice(&src[a..a + N]);
    }
}

/// Sets every element of a strided block of `dst` to `value` (one element's bytes).
pub(crate) fn fill_block(spans: &[Span], value: &[u8], dst: &mut [u8], dst0: usize) {
    let esize = value.len();
    let spans = coalesce(spans);
    for_each_run(&spans, 0, dst0, |_, d, inner| {
        if inner.dst == 1 {
            fill_run(&mut dst[d * esize..(d + inner.count) * esize], value);
        } else {
            for i in 0..inner.count {
                let b = (d + i * inner.dst) * esize;
                dst[b..b + esize].copy_from_slice(value);
            }
        }
    });
}

/// Fills `run` with copies of the element `value`: a byte fill when all its
/// bytes are equal (zero, say), else one copy doubled until the run is full,
/// so that a chunk-sized run is a few large copies, not one per element.
fn fill_run(run: &mut [u8], value: &[u8]) {
    if value.iter().all(|&b| b == value[0]) {
        run.fill(value[0]);
        return;
    }
    let Some(first) = run.get_mut(..value.len()) else { return };
    first.copy_from_slice(value);
    let mut done = value.len();
    while done < run.len() {
        let n = done.min(run.len() - done);
        run.copy_within(..n, done);
        done += n;
    }
}

/// Whether every element of a strided block of `src` equals the block's first element.
pub(crate) fn block_is_constant(spans: &[Span], esize: usize, src: &[u8], src0: usize) -> bool {
    let first = &src[src0 * esize..(src0 + 1) * esize];
    let spans = coalesce(spans);
    let mut same = true;
    for_each_run(&spans, src0, 0, |s, _, inner| {
        if !same {
            return;
        }
        same = if inner.src == 1 {
            src[s * esize..(s + inner.count) * esize].chunks_exact(esize).all(|e| e == first)
        } else {
            (0..inner.count).all(|i| {
                let a = (s + i * inner.src) * esize;
                &src[a..a + esize] == first
            })
        };
    });
    same
}

/// Element strides of an array of `shape` in the given order.
pub(crate) fn strides(shape: &[usize], order: Order) -> Vec<usize> {
    let mut st = vec![1usize; shape.len()];
    strides_into(shape, order, &mut st);
    st
}

/// [`strides`] into `st` (as long as `shape`), without allocating.
pub(crate) fn strides_into(shape: &[usize], order: Order, st: &mut [usize]) {
    let n = shape.len();
    st.fill(1);
    match order {
        Order::C => {
            for d in (0..n.saturating_sub(1)).rev() {
                st[d] = st[d + 1] * shape[d + 1];
            }
        }
        Order::Fortran => {
            for d in 1..n {
                st[d] = st[d - 1] * shape[d - 1];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_blocks_coalesce_to_one_run() {
        let spans = [Span { count: 4, src: 12, dst: 12 }, Span { count: 3, src: 4, dst: 4 }, Span { count: 4, src: 1, dst: 1 }];
        assert_eq!(coalesce(&spans), vec![Span { count: 48, src: 1, dst: 1 }]);
        let partial = [Span { count: 2, src: 16, dst: 4 }, Span { count: 4, src: 1, dst: 1 }];
        assert_eq!(coalesce(&partial), partial.to_vec());
    }

    #[test]
    fn transposing_copy_and_fill() {
        // A 2x3 C-order source copied into a Fortran-order destination.
        let src: Vec<u8> = (0..6).collect();
        let mut dst = vec![0u8; 6];
        let (cs, fs) = (strides(&[2, 3], Order::C), strides(&[2, 3], Order::Fortran));
        let spans = [Span { count: 2, src: cs[0], dst: fs[0] }, Span { count: 3, src: cs[1], dst: fs[1] }];
        copy_block(&spans, 1, &src, 0, &mut dst, 0);
        assert_eq!(dst, vec![0, 3, 1, 4, 2, 5]);
        fill_block(&[Span { count: 2, src: 0, dst: 3 }], &[9], &mut dst, 1);
        assert_eq!(dst, vec![0, 9, 1, 4, 9, 5]);
        assert!(block_is_constant(&[Span { count: 2, src: 3, dst: 0 }], 1, &dst, 1));
        assert!(!block_is_constant(&[Span { count: 3, src: 1, dst: 0 }], 1, &dst, 0));
    }

    #[test]
    fn fills_write_every_element_of_the_block_and_nothing_else() {
        for value in [&[7u8, 1, 2, 3][..], &[0, 0, 0, 0], &[5, 5], &[1, 2, 3, 4, 5, 6, 7, 8], &[9]] {
            let e = value.len();
            // A 3 x 37 block, contiguous rows, in a 4 x 40 buffer at row 1, column 2.
            let spans = [Span { count: 3, src: 0, dst: 40 }, Span { count: 37, src: 0, dst: 1 }];
            let mut dst = vec![0xAAu8; 4 * 40 * e];
            fill_block(&spans, value, &mut dst, 42);
            for (i, el) in dst.chunks_exact(e).enumerate() {
                let inside = (1..4).contains(&(i / 40)) && (2..39).contains(&(i % 40));
                assert_eq!(el, if inside { value.to_vec() } else { vec![0xAA; e] }, "element {i} of {value:?}");
            }
        }
    }

    #[test]
    fn regions_are_checked() {
        let r = Region::new(&[2, 0], &[3, 5]).unwrap();
        assert_eq!(r.check_within(&[5, 5], &"v").unwrap(), 15);
        assert!(r.check_within(&[4, 5], &"v").is_err());
        let s = r.clone().with_step(&[2, 1]).unwrap();
        assert!(s.check_within(&[7, 5], &"v").is_ok());
        assert!(s.check_within(&[6, 5], &"v").is_err());
        assert!(Region::new(&[0], &[1, 2]).is_err());
        assert!(r.with_step(&[0, 1]).is_err());
        let huge = Region::new(&[u64::MAX - 1], &[3]).unwrap();
        assert!(huge.check_within(&[u64::MAX], &"v").is_err());
    }
}

/// The pieces in which a copy moves a region of `shape` one at a time:
/// boxes aligned to multiples of `chunk`, in C order, each at most about
/// `budget` bytes of `esize`-byte elements (but at least one chunk). A piece
/// is whole along as many trailing axes as the budget allows, so that it is
/// few contiguous runs of a C-order buffer or file. Each item is the
/// piece's (start, shape).
#[derive(Debug, Clone)]
pub struct RegionPieces {
    shape: Vec<u64>,
    piece: Vec<u64>,
    next: Option<Vec<u64>>,
}

impl RegionPieces {
    /// The pieces of `shape` for chunks of `chunk` (one extent per axis).
    pub fn new(shape: &[u64], chunk: &[u64], esize: u64, budget: u64) -> RegionPieces {
        let mut piece: Vec<u64> = chunk.iter().zip(shape).map(|(&c, &n)| c.min(n).max(1)).collect();
        for k in (0..shape.len()).rev() {
            let others: u64 = piece.iter().enumerate().filter(|&(i, _)| i != k).map(|(_, &b)| b).product::<u64>().saturating_mul(esize);
            if others.saturating_mul(shape[k]) <= budget {
                piece[k] = shape[k];
                continue;
            }
            let c = piece[k];
            piece[k] = ((budget / others.max(1)) / c * c).max(c);
            break;
        }
        let next = if shape.iter().all(|&n| n > 0) { Some(vec![0; shape.len()]) } else { None };
        RegionPieces { shape: shape.to_vec(), piece, next }
    }
}

impl Iterator for RegionPieces {
    /// (start, shape) of the next piece.
    type Item = (Vec<u64>, Vec<u64>);
    fn next(&mut self) -> Option<Self::Item> {
        let start = self.next.take()?;
        let shape: Vec<u64> = start.iter().zip(&self.piece).zip(&self.shape).map(|((&s, &b), &n)| b.min(n - s)).collect();
        let mut pos = start.clone();
        for k in (0..pos.len()).rev() {
            pos[k] += self.piece[k];
            if pos[k] < self.shape[k] {
                self.next = Some(pos);
                break;
            }
            pos[k] = 0;
        }
        Some((start, shape))
    }
}
