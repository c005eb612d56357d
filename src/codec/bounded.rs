//! The error-bounded codec (SPEC.md 6.6): float chunks stored with every
//! value within an absolute tolerance `t` of the value written. Four
//! predictors share the quantization and the checks here: Lorenzo
//! (method 1, this file), and interpolation ([`interp`]) on a grid of
//! multiples (method 2, format 1.6), on one that also holds the last
//! sample of each axis (method 3, format 1.7), or on that one with finer
//! steps on the coarser levels (method 4, format 1.8, the default of new
//! variables).
//!
//! Lorenzo: each value is predicted from its already *reconstructed* neighbours by
//! the Lorenzo predictor over a 3-D view of the chunk (its own axes, its
//! last axis with the others merged, or one axis: the encoder keeps the
//! view whose codes cost least on the chunk's leading eighth); the
//! difference is quantized to an integer number of steps of `2t`, and the
//! value the reader will compute,
//! `p + q * 2t` rounded to the element type, is checked against the value
//! written with exact arithmetic. A value that misses the bound (rounding
//! near it, overflow, a code out of range), a NaN or infinity, and a fill or
//! no-value element that would not come back bit for bit is an outlier,
//! stored exactly. So the bound holds by construction, value by value, and
//! the reader's arithmetic is the encoder's. Codes are byte planes
//! compressed by one zstd frame with the outliers after them.
//!
//! Each reconstructed value feeds the next prediction, a chain of rounded
//! operations that leaves the processor waiting when values are done one by
//! one; encoder and decoder both go through [`walk`], which reconstructs a
//! few rows of a plane at once, in the order of a wavefront, so that their
//! chains overlap, with exactly the values of the C-order walk.
//!
//! The encoder then decodes what it wrote and checks every value once more;
//! if anything is off the caller stores the chunk losslessly.

use super::zstd;
use crate::spec::Predictor;

mod interp;

/// First header byte: the stream's method (Lorenzo prediction, zstd).
const METHOD_LORENZO: u8 = 1;
/// Bytes before the zstd frame.
pub(crate) const HEADER_LEN: usize = 28;
/// The largest |q|: codes are `zigzag(q) + 1`, which must fit 32 bits.
const MAX_STEPS: f64 = (1u64 << 30) as f64;
/// The largest tolerance a stream may declare (2t and every p + q * 2t
/// of a finite prediction stay far from overflow in their own right).
pub(crate) const MAX_TOLERANCE: f64 = 1e300;

/// What an element type needs here: f32 or f64.
trait Float: Copy {
    const SIZE: usize;
    fn get(b: &[u8]) -> Self;
    fn put(self, b: &mut [u8]);
    fn wide(self) -> f64;
    /// `x` rounded to nearest (ties to even), as `as` does.
    fn narrow(x: f64) -> Self;
    fn bits(self) -> u64;
    fn le(self, out: &mut Vec<u8>);
    fn from_le(b: &[u8]) -> Self;
}

// Chunk buffers are in native byte order; the stored outliers are little-endian.
#[allow(clippy::host_endian_bytes)]
impl Float for f32 {
    const SIZE: usize = 4;
    fn get(b: &[u8]) -> f32 {
        f32::from_ne_bytes([b[0], b[1], b[2], b[3]])
    }
    fn put(self, b: &mut [u8]) {
        b.copy_from_slice(&self.to_ne_bytes());
    }
    fn wide(self) -> f64 {
        f64::from(self)
    }
    fn narrow(x: f64) -> f32 {
        x as f32
    }
    fn bits(self) -> u64 {
        u64::from(self.to_bits())
    }
    fn le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn from_le(b: &[u8]) -> f32 {
        f32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
}

#[allow(clippy::host_endian_bytes)]
impl Float for f64 {
    const SIZE: usize = 8;
    fn get(b: &[u8]) -> f64 {
        f64::from_ne_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }
    fn put(self, b: &mut [u8]) {
        b.copy_from_slice(&self.to_ne_bytes());
    }
    fn wide(self) -> f64 {
        self
    }
    fn narrow(x: f64) -> f64 {
        x
    }
    fn bits(self) -> u64 {
        self.to_bits()
    }
    fn le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn from_le(b: &[u8]) -> f64 {
        f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }
}

/// Whether |a - b| <= t holds for the real numbers a, b and t (t finite,
/// positive), whatever the rounding of a - b. Rounding is monotonic and t
/// a double, so a rounded difference below t means an exact one at most t,
/// and above t one above t; only a rounded difference equal to t needs its
/// exact error, from TwoSum (Knuth), to decide.
pub(crate) fn within(a: f64, b: f64, t: f64) -> bool {
    let s = a - b;
    if s.abs() != t {
        // Also false for a difference that is not finite.
        return s.abs() < t;
    }
    let a1 = s + b;
    let b1 = s - a1;
    let e = (a - a1) + (-b - b1);
    if s < 0.0 {
        e >= 0.0
    } else {
        e <= 0.0
    }
}

/// Rows of a plane reconstructed together ([`walk`]).
const ROWS: usize = 4;

/// Reconstructs a chunk under the predictor's view `n` (the 3-D array
/// `[n0, n1, n2]`, C order): `element(p, i)` gets element i (linear index)
/// with its prediction p, computed from reconstructed neighbours in
/// SPEC.md's order, and returns its reconstructed value.
///
/// Each element depends on the one before it through a long chain of
/// rounded operations (predict, quantize, reconstruct), so one row at a time
/// leaves the processor waiting on that chain. Element (i, j, l) needs only
/// (i, j, l-1), (i, j-1, l-1) and (i, j-1, l) of its own plane, so [`ROWS`]
/// rows go together as a wavefront, each one element behind the row above:
/// their chains are independent and overlap. Every element still sees
/// exactly the neighbours, and computes exactly the value, that the plain
/// C-order walk gives it; only the order of the visits differs.
#[inline(always)]
fn walk(n: [usize; 3], mut element: impl FnMut(f64, usize) -> f64) {
    if n.contains(&0) {
        return;
    }
    if n[0] * n[1] == 1 {
        // One axis: every neighbour but the previous element is a zero of
        // the padding, and the sum is 0 + that element (+0 for -0, as the
        // full sum gives).
        let mut left = 0.0;
        for i in 0..n[2] {
            left = kept(element(0.0 + left, i));
        }
    } else if n[0] == 1 {
        planes::<true>(n, element);
    } else {
        planes::<false>(n, element);
    }
}

/// [`walk`] over planes padded by a zero row and column. `FLAT`: a single
/// plane, whose predecessor is all zeros and whose rows are needed only
/// until the next rows of the wavefront are done; then only the row above
/// the wavefront and its rows are kept, so that a 2-D view of a large chunk
/// costs little memory.
#[inline(always)]
fn planes<const FLAT: bool>(n: [usize; 3], mut element: impl FnMut(f64, usize) -> f64) {
    let row = n[2] + 1;
    let rows_kept = if FLAT { ROWS.min(n[1]) + 1 } else { n[1] + 1 };
    let mut prev = vec![0.0; if FLAT { 0 } else { rows_kept * row }];
    let mut cur = vec![0.0; rows_kept * row];
    let mut i0 = 0;
    for _ in 0..n[0] {
        for j0 in (0..n[1]).step_by(ROWS) {
            let rows = ROWS.min(n[1] - j0);
            // Where the row above the wavefront starts.
            let top = if FLAT { 0 } else { j0 * row };
            for s in 0..n[2] + rows - 1 {
                // Row j0 + g is at element s - g.
                for g in s.saturating_sub(n[2] - 1)..rows.min(s + 1) {
                    let k = s - g;
                    let o = top + (g + 1) * row + k + 1;
                    let (p, c) = (&prev, &cur);
                    let pred = if FLAT {
                        // The same sum, with the earlier plane's zeros.
                        0.0 + c[o - row] - 0.0 - 0.0 - c[o - row - 1] + 0.0 + c[o - 1]
                    } else {
                        p[o] + c[o - row] - p[o - row] - p[o - 1] - c[o - row - 1] + p[o - row - 1] + c[o - 1]
                    };
                    cur[o] = kept(element(pred, i0 + (j0 + g) * n[2] + k));
                }
            }
            if FLAT {
                // The wavefront's last row is the row above the next one.
                cur.copy_within(rows * row..(rows + 1) * row, 0);
            }
        }
        i0 += n[1] * n[2];
        std::mem::swap(&mut prev, &mut cur);
    }
}

/// What the predictor keeps of a reconstructed value: non-finite ones count as 0.
#[inline(always)]
fn kept(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        0.0
    }
}

/// The predictor's view of a chunk shape: axes of extent 1 are dropped, the
/// leading ones merged while more than 3 remain, and 1s put in front.
pub(crate) fn lorenzo_shape(shape: &[usize]) -> [usize; 3] {
    let mut axes: Vec<usize> = shape.iter().copied().filter(|&e| e > 1).collect();
    while axes.len() > 3 {
        let merged = axes[0] * axes[1];
        axes.splice(0..2, [merged]);
    }
    let mut n = [1usize; 3];
    n[3 - axes.len()..].copy_from_slice(&axes);
    n
}

/// Encodes one chunk (native-order elements of f32 when `esize` is 4, f64
/// when 8) of shape `shape` with tolerance `tol`, keeping the elements whose
/// bits are in `exact` bit for bit; zstd at `level`; predicted by
/// `predictor` (method 1, 2, 3 or 4). None when the stream
/// would not be shorter than the raw chunk, or when decoding it does not
/// give back every value within the bound: the caller stores it losslessly.
pub(crate) fn encode(
    esize: usize,
    data: &[u8],
    shape: &[usize],
    tol: f64,
    exact: &[u64],
    level: u8,
    predictor: Predictor,
) -> Option<Vec<u8>> {
    if !(tol > 0.0 && tol <= MAX_TOLERANCE) || shape.iter().product::<usize>() * esize != data.len() || data.is_empty() {
        return None;
    }
    let method = match predictor {
        Predictor::Interpolation => interp::METHOD,
        Predictor::Anchored => interp::METHOD_ANCHORED,
        Predictor::Graded => interp::METHOD_GRADED,
        Predictor::Lorenzo => METHOD_LORENZO,
    };
    let out = match (esize, predictor) {
        (4, Predictor::Lorenzo) => encode_as::<f32>(data, shape, tol, exact, level)?,
        (8, Predictor::Lorenzo) => encode_as::<f64>(data, shape, tol, exact, level)?,
        (4, _) => interp::encode::<f32>(data, lorenzo_shape(shape), method, tol, exact, level)?,
        (8, _) => interp::encode::<f64>(data, lorenzo_shape(shape), method, tol, exact, level)?,
        _ => return None,
    };
    // The guarantee, checked on the bytes as the reader will see them.
    let mut back = vec![0u8; data.len()];
    decode(esize, &out, &mut back).ok()?;
    let ok = match esize {
        4 => check::<f32>(data, &back, tol, exact),
        _ => check::<f64>(data, &back, tol, exact),
    };
    ok.then_some(out)
}

/// Whether every value of `back` is within `tol` of `data`'s, and bit for
/// bit equal where `data`'s is NaN, infinite, or in `exact`.
fn check<T: Float>(data: &[u8], back: &[u8], tol: f64, exact: &[u64]) -> bool {
    data.chunks_exact(T::SIZE).zip(back.chunks_exact(T::SIZE)).all(|(a, b)| {
        let (x, y) = (T::get(a), T::get(b));
        if !x.wide().is_finite() || exact.contains(&x.bits()) {
            x.bits() == y.bits()
        } else {
            within(x.wide(), y.wide(), tol)
        }
    })
}

/// The codes and outliers of a chunk under the predictor's view `n`.
struct Quantized {
    n: [usize; 3],
    codes: Vec<u32>,
    /// The outliers' exact values, little-endian, in element order.
    outliers: Vec<u8>,
}

impl Quantized {
    /// An estimate of the bits the codes and outliers take once compressed:
    /// the codes' order-0 entropy (codes past 2^16 at 32 bits each) and 8
    /// bits per outlier byte. Only compared between views of one chunk.
    fn cost(&self) -> f64 {
        // Bins up to the largest code only (a few hundred, usually): the
        // codes of a smooth chunk are small, and clearing and summing all
        // 2^16 bins costs more than counting them.
        let max = self.codes.iter().copied().max().unwrap_or(0) as usize;
        let mut counts = vec![0u32; (max + 1).min(1 << 16)];
        let mut wide = 0usize;
        for &c in &self.codes {
            match counts.get_mut(c as usize) {
                Some(k) => *k += 1,
                None => wide += 1,
            }
        }
        let total = self.codes.len() as f64;
        let entropy: f64 = counts.iter().filter(|&&k| k > 0).map(|&k| -f64::from(k) * (f64::from(k) / total).log2()).sum();
        entropy + 32.0 * wide as f64 + 8.0 * self.outliers.len() as f64
    }
}

/// The whole number of steps nearest `t` steps, rounded half away from
/// zero by a truncating conversion: f64::round is a libm call here, and any
/// q will do (the encoder's check decides).
#[inline(always)]
fn nearest(t: f64) -> i64 {
    (t + 0.5f64.copysign(t)) as i64
}

/// The value the reader reconstructs from `q` steps of `step` from the
/// prediction `p` (SPEC.md 6.6).
#[inline(always)]
fn reconstruct<T: Float>(p: f64, q: i64, step: f64) -> T {
    T::narrow(p + q as f64 * step)
}

/// The code of `q` steps: zigzag(q) + 1 (code 0 marks an outlier).
#[inline(always)]
fn code_of(q: i64) -> u32 {
    (((q << 1) ^ (q >> 63)) + 1) as u32
}

/// The value code `c` (not 0) gives to an element predicted as `p`.
#[inline(always)]
fn decoded<T: Float>(c: u32, p: f64, step: f64) -> T {
    let z = i64::from(c.wrapping_sub(1));
    reconstruct(p, (z >> 1) ^ -(z & 1), step)
}

/// The code of `x` predicted as `p` (for q steps of `step`, whose `inverse`
/// is given) and the value the reader will reconstruct from it; None when
/// `x` must be an outlier (not finite, out of range, beyond the bound once
/// rounded, or in `exact` and not coming back bit for bit).
#[inline(always)]
fn quantize_one<T: Float>(x: T, p: f64, step: f64, inverse: f64, tol: f64, exact: &[u64]) -> Option<(u32, f64)> {
    let xw = x.wide();
    let t = (xw - p) * inverse;
    // Also false for NaN (a prediction that overflowed).
    if !(xw.is_finite() && t.abs() <= MAX_STEPS) {
        return None;
    }
    let q = nearest(t);
    let y: T = reconstruct(p, q, step);
    let ok = if exact.contains(&x.bits()) { y.bits() == x.bits() } else { within(xw, y.wide(), tol) };
    ok.then(|| (code_of(q), y.wide()))
}

/// Quantizes a chunk under the predictor's view `n` (SPEC.md 6.6).
fn quantize<T: Float>(data: &[u8], n: [usize; 3], tol: f64, exact: &[u64]) -> Quantized {
    let step = 2.0 * tol;
    // Any q will do (the check decides): a product is cheaper than a quotient.
    let inverse = 1.0 / step;
    let value = |i: usize| T::get(&data[i * T::SIZE..(i + 1) * T::SIZE]);
    // The views' extents multiply to the element count.
    let mut codes = vec![0u32; data.len() / T::SIZE];
    walk(
        n,
        #[inline(always)]
        |p, i| {
            let x = value(i);
            match quantize_one(x, p, step, inverse, tol, exact) {
                Some((code, y)) => {
                    codes[i] = code;
                    y
                }
                // An outlier (code 0): the reader takes x itself.
                None => x.wide(),
            }
        },
    );
    // The outliers in element order, which the walk does not follow.
    let mut outliers: Vec<u8> = Vec::new();
    for (i, _) in codes.iter().enumerate().filter(|(_, &c)| c == 0) {
        value(i).le(&mut outliers);
    }
    Quantized { n, codes, outliers }
}

/// The predictor's views the encoder tries for a chunk whose own view is
/// `own` ([`lorenzo_shape`]): that one; the last axis alone with the others
/// merged before it, 2-D; and all elements as one axis, 1-D. On noisy data
/// the lower-order views predict better (fewer noisy neighbours are
/// summed); on smooth data the 3-D one does.
fn views_of(own: [usize; 3]) -> [[usize; 3]; 3] {
    let elems: usize = own.iter().product();
    let last = own[2];
    [own, lorenzo_shape(&[elems / last, last]), [1, 1, elems]]
}

fn encode_as<T: Float>(data: &[u8], shape: &[usize], tol: f64, exact: &[u64], level: u8) -> Option<Vec<u8>> {
    let own = lorenzo_shape(shape);
    let full = views_of(own);
    // The views are judged on a leading part of the chunk (an eighth of its
    // first axis longer than 1), quantized under each; the chunk is then
    // quantized under the winner alone.
    let lead = own.iter().position(|&e| e > 1).unwrap_or(2);
    let mut part = own;
    part[lead] = (own[lead] / 8).max(1);
    let sample = views_of(part);
    let sampled = part != own;
    let m = part.iter().product::<usize>() * T::SIZE;
    let mut best: Option<(f64, usize, Quantized)> = None;
    for k in 0..3 {
        if sample[..k].contains(&sample[k]) {
            continue;
        }
        let q = quantize::<T>(&data[..m], sample[k], tol, exact);
        let cost = q.cost();
        if best.as_ref().is_none_or(|(c, _, _)| cost < *c) {
            best = Some((cost, k, q));
        }
    }
    let (_, k, q) = best?;
    let best = if sampled { quantize::<T>(data, full[k], tol, exact) } else { q };
    let Quantized { n, codes, outliers } = best;
    let elems = codes.len();
    let max = codes.iter().copied().max().unwrap_or(0);
    let width: usize = if max < 1 << 8 {
        1
    } else if max < 1 << 16 {
        2
    } else {
        4
    };
    let mut payload = vec![0u8; elems * width];
    for b in 0..width {
        let plane = &mut payload[b * elems..(b + 1) * elems];
        for (d, &c) in plane.iter_mut().zip(&codes) {
            *d = (c >> (8 * b)) as u8;
        }
    }
    payload.extend_from_slice(&outliers);
    let mut out = Vec::with_capacity(HEADER_LEN);
    out.extend_from_slice(&[METHOD_LORENZO, width as u8, 0, 0]);
    out.extend_from_slice(&tol.to_le_bytes());
    out.extend_from_slice(&u32::try_from(outliers.len() / T::SIZE).ok()?.to_le_bytes());
    for e in n {
        out.extend_from_slice(&u32::try_from(e).ok()?.to_le_bytes());
    }
    let frame = zstd::compress_shorter(&payload, level).or_else(|| zstd::compress_shorter(&payload, 1))?;
    out.extend_from_slice(&frame);
    (out.len() < data.len()).then_some(out)
}

/// Reads a little-endian u32 at `at` (the header is long enough).
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The header fields both methods share (SPEC.md 6.6.1 and 6.6.2).
struct Header {
    width: usize,
    tol: f64,
    outliers: usize,
    n: [usize; 3],
}

/// Checks the shared fields of a header of `len` bytes against a chunk of
/// `elems` elements.
fn common_header(stored: &[u8], len: usize, elems: usize) -> Result<Header, String> {
    if stored.len() < len {
        return Err(format!("bounded chunk of {} bytes is shorter than its {len}-byte header", stored.len()));
    }
    let width = usize::from(stored[1]);
    if ![1, 2, 4].contains(&width) {
        return Err(format!("bounded chunk: code width {width} (expected 1, 2 or 4)"));
    }
    let mut t = [0u8; 8];
    t.copy_from_slice(&stored[4..12]);
    let tol = f64::from_le_bytes(t);
    if !(tol > 0.0 && tol <= MAX_TOLERANCE) {
        return Err(format!("bounded chunk: tolerance {tol:e} is not in (0, 1e300]"));
    }
    let outliers = u32_at(stored, 12) as usize;
    if outliers > elems {
        return Err(format!("bounded chunk: {outliers} outliers in a chunk of {elems} elements"));
    }
    let n = [u32_at(stored, 16) as usize, u32_at(stored, 20) as usize, u32_at(stored, 24) as usize];
    if n.iter().try_fold(1usize, |a, &e| a.checked_mul(e)) != Some(elems) {
        return Err(format!("bounded chunk: predictor shape {n:?} does not hold the chunk's {elems} elements"));
    }
    Ok(Header { width, tol, outliers, n })
}

/// The header's fields, checked against a chunk of `elems` elements of
/// `esize` bytes: (code width, tolerance, outliers, 3-D shape, payload bytes).
fn header(stored: &[u8], esize: usize, elems: usize) -> Result<(usize, f64, usize, [usize; 3], usize), String> {
    let h = common_header(stored, HEADER_LEN, elems)?;
    if stored[2] != 0 || stored[3] != 0 {
        return Err("bounded chunk: reserved header bytes are not zero".into());
    }
    Ok((h.width, h.tol, h.outliers, h.n, elems * h.width + h.outliers * esize))
}

/// Decodes a stream made by [`encode`] into `out` (native-order elements,
/// f32 when `esize` is 4, f64 when 8); every field is checked, and nothing
/// is allocated beyond what `out`'s length implies.
pub(crate) fn decode(esize: usize, stored: &[u8], out: &mut [u8]) -> Result<(), String> {
    if esize != 4 && esize != 8 {
        return Err("bounded chunk in a variable that is not float32 or float64".into());
    }
    match stored.first() {
        Some(&METHOD_LORENZO) => {}
        Some(&(interp::METHOD | interp::METHOD_ANCHORED | interp::METHOD_GRADED)) if esize == 4 => {
            return interp::decode::<f32>(stored, out)
        }
        Some(&(interp::METHOD | interp::METHOD_ANCHORED | interp::METHOD_GRADED)) => return interp::decode::<f64>(stored, out),
        Some(&m) => return Err(format!("bounded chunk: unknown method {m}")),
        None => return Err("bounded chunk of 0 bytes".into()),
    }
    let elems = out.len() / esize;
    let (width, tol, outliers, n, len) = header(stored, esize, elems)?;
    let mut payload = vec![0u8; len];
    zstd::decompress_exact(&stored[HEADER_LEN..], &mut payload)?;
    if esize == 4 {
        decode_as::<f32>(&payload, width, tol, outliers, n, out)
    } else {
        decode_as::<f64>(&payload, width, tol, outliers, n, out)
    }
}

fn decode_as<T: Float>(payload: &[u8], width: usize, tol: f64, outliers: usize, n: [usize; 3], out: &mut [u8]) -> Result<(), String> {
    let elems = out.len() / T::SIZE;
    let step = 2.0 * tol;
    let (planes, exact) = payload.split_at(elems * width);
    let code = |i: usize| (1..width).fold(u32::from(planes[i]), |c, b| c | u32::from(planes[b * elems + i]) << (8 * b));
    // The outliers first, in element order, each where its code 0 is: the
    // reconstruction does not visit the elements in order.
    let mut exact = exact.chunks_exact(T::SIZE);
    for i in 0..elems {
        if planes[i] == 0 && code(i) == 0 {
            let x = T::from_le(exact.next().ok_or("bounded chunk: more outlier codes than outliers")?);
            x.put(&mut out[i * T::SIZE..(i + 1) * T::SIZE]);
        }
    }
    if exact.next().is_some() {
        return Err(format!("bounded chunk: {outliers} outliers declared, fewer outlier codes"));
    }
    walk(
        n,
        #[inline(always)]
        |p, i| {
            let at = &mut out[i * T::SIZE..(i + 1) * T::SIZE];
            let c = code(i);
            if c == 0 {
                return T::get(at).wide();
            }
            let y: T = decoded(c, p, step);
            y.put(at);
            y.wide()
        },
    );
    Ok(())
}

#[cfg(test)]
// Test buffers are in memory form, native byte order.
#[allow(clippy::host_endian_bytes)]
pub(super) mod tests {
    use super::*;

    /// An xorshift generator: tests need no dependency for random numbers.
    pub(super) struct Rng(pub(super) u64);
    impl Rng {
        pub(super) fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        pub(super) fn unit(&mut self) -> f64 {
            (self.next() >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    pub(super) fn bytes32(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }
    pub(super) fn bytes64(v: &[f64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    /// Encodes and decodes; checks the bound on every value against the
    /// input array (in f64, independently of `within`: with exact rational
    /// comparison for f32, whose differences f64 holds exactly when the
    /// exponents are close, and by the sign of the TwoSum error otherwise).
    /// Returns the stored length, or None when the encoder declined.
    /// Under every predictor: the shortest stream's length, or None when
    /// any declined.
    pub(super) fn round_trip32(v: &[f32], shape: &[usize], tol: f64, exact: &[f32]) -> Option<usize> {
        PREDICTORS.iter().map(|&p| round_trip32_by(v, shape, tol, exact, p)).try_fold(usize::MAX, |a, b| Some(a.min(b?)))
    }

    const PREDICTORS: [Predictor; 4] = [Predictor::Lorenzo, Predictor::Interpolation, Predictor::Anchored, Predictor::Graded];

    fn round_trip32_by(v: &[f32], shape: &[usize], tol: f64, exact: &[f32], interpolation: Predictor) -> Option<usize> {
        let data = bytes32(v);
        let ex: Vec<u64> = exact.iter().map(|x| u64::from(x.to_bits())).collect();
        let stored = encode(4, &data, shape, tol, &ex, 3, interpolation)?;
        let mut back = vec![0u8; data.len()];
        decode(4, &stored, &mut back).unwrap();
        for (i, (x, y)) in v.iter().zip(back.chunks_exact(4)).enumerate() {
            let y = f32::from_ne_bytes(y.try_into().unwrap());
            if !x.is_finite() || ex.contains(&u64::from(x.to_bits())) {
                assert_eq!(x.to_bits(), y.to_bits(), "value {i}: {x} came back as {y}");
            } else {
                assert!(exactly_within(f64::from(*x), f64::from(y), tol), "value {i}: {x} came back as {y}, beyond {tol:e}");
            }
        }
        Some(stored.len())
    }

    /// |x - y| <= t exactly, independently of the encoder's `within`: x - y
    /// as a double-double by Dekker's Fast2Sum, larger magnitude first.
    fn exactly_within(x: f64, y: f64, t: f64) -> bool {
        let (a, b) = if x.abs() >= y.abs() { (x, -y) } else { (-y, x) };
        let s = a + b;
        let e = b - (s - a);
        s.is_finite() && (s.abs() < t || (s.abs() == t && e * s.signum() <= 0.0))
    }

    /// As [`round_trip32`].
    pub(super) fn round_trip64(v: &[f64], shape: &[usize], tol: f64) -> Option<usize> {
        PREDICTORS.iter().map(|&p| round_trip64_by(v, shape, tol, p)).try_fold(usize::MAX, |a, b| Some(a.min(b?)))
    }

    fn round_trip64_by(v: &[f64], shape: &[usize], tol: f64, interpolation: Predictor) -> Option<usize> {
        let data = bytes64(v);
        let stored = encode(8, &data, shape, tol, &[], 3, interpolation)?;
        let mut back = vec![0u8; data.len()];
        decode(8, &stored, &mut back).unwrap();
        for (i, (x, y)) in v.iter().zip(back.chunks_exact(8)).enumerate() {
            let y = f64::from_ne_bytes(y.try_into().unwrap());
            if !x.is_finite() {
                assert_eq!(x.to_bits(), y.to_bits(), "value {i}");
                continue;
            }
            assert!(exactly_within(*x, y, tol), "value {i}: {x} came back as {y}, beyond {tol:e}");
        }
        Some(stored.len())
    }

    #[test]
    fn within_is_exact_at_the_bound() {
        // 1 + 2^-52 and 1 are 2^-52 apart; a bound of 2^-53 is exceeded, 2^-52 is met.
        let u = f64::EPSILON;
        assert!(within(1.0 + u, 1.0, u));
        assert!(!within(1.0 + u, 1.0, u / 2.0));
        // A difference that rounds down onto the bound: 2^60 - (-1) rounds to 2^60.
        let big = (1u64 << 60) as f64;
        assert!(!within(big, -1.0, big));
        assert!(within(big, 1.0, big));
        assert!(!within(f64::MAX, -f64::MAX, 1e300));
        assert!(within(-0.0, 0.0, f64::MIN_POSITIVE));
    }

    #[test]
    fn smooth_volumes_compress_within_the_bound() {
        let shape = [24usize, 20, 32];
        let v: Vec<f32> = (0..24 * 20 * 32)
            .map(|i| {
                let (a, b, c) = ((i / 640) as f32, ((i / 32) % 20) as f32, (i % 32) as f32);
                (a * 0.3).sin() * (b * 0.2).cos() + (c * 0.5).sin()
            })
            .collect();
        let raw = v.len() * 4;
        for tol in [1e-1, 1e-2, 1e-3, 1e-4] {
            let n = round_trip32(&v, &shape, tol, &[]).expect("smooth data compresses");
            assert!(n < raw / 2, "tolerance {tol}: {n} bytes of {raw}");
        }
        let w: Vec<f64> = v.iter().map(|&x| f64::from(x) * 1e3).collect();
        for tol in [1.0, 1e-3, 1e-6] {
            round_trip64(&w, &shape, tol).expect("smooth data compresses");
        }
    }

    #[test]
    fn specials_come_back_bit_for_bit() {
        let mut rng = Rng(7);
        let fill = -999.25f32;
        let v: Vec<f32> = (0..4096)
            .map(|i| match rng.next() % 16 {
                0 => f32::NAN,
                1 => f32::from_bits(0x7fc0_1234),
                2 => f32::INFINITY,
                3 => f32::NEG_INFINITY,
                4 | 5 => fill,
                6 => -0.0,
                _ => (i as f32 * 0.01).sin(),
            })
            .collect();
        round_trip32(&v, &[64, 64], 1e-3, &[fill, -0.0]).unwrap();
        let w: Vec<f64> = v.iter().map(|&x| f64::from(x)).collect();
        round_trip64(&w, &[16, 16, 16], 1e-3).unwrap();
    }

    /// Random and adversarial inputs: constant blocks, spikes, alternating
    /// signs, subnormals, huge dynamic range, values near the bound's
    /// rounding edges, tolerances from subnormal to enormous.
    #[test]
    fn the_bound_holds_on_adversarial_inputs() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let shapes: [&[usize]; 6] = [&[1000], &[10, 100], &[10, 10, 10], &[2, 5, 10, 10], &[1, 1000], &[1000, 1]];
        let tols = [1e-40, 1e-30, 1e-7, 1e-3, 0.5, 1.0, 3.0, 1e10, 1e30, 1e300];
        let mut declined = 0;
        for case in 0..120 {
            let shape = shapes[case % shapes.len()];
            let tol = tols[(case / shapes.len()) % tols.len()];
            let kind = case % 8;
            let v: Vec<f64> = (0..1000)
                .map(|i| match kind {
                    0 => rng.unit() * 2.0 - 1.0,
                    1 => 42.0,
                    2 => {
                        if i % 97 == 0 {
                            1e30
                        } else {
                            0.0
                        }
                    }
                    3 => {
                        if i % 2 == 0 {
                            tol * 3.0
                        } else {
                            -tol * 3.0
                        }
                    }
                    4 => f64::from_bits(rng.next() % (1 << 52)) * if i % 2 == 0 { 1.0 } else { -1.0 },
                    5 => (rng.unit() - 0.5) * 10f64.powi((rng.next() % 600) as i32 - 300),
                    6 => f64::from_bits(rng.next()),
                    _ => (i as f64 * 0.37).floor() * tol * 2.0 + tol * (rng.next() % 3) as f64,
                })
                .collect();
            if round_trip64(&v, shape, tol).is_none() {
                declined += 1;
            }
            let v32: Vec<f32> = v.iter().map(|&x| x as f32).collect();
            if round_trip32(&v32, shape, tol, &[42.0]).is_none() {
                declined += 1;
            }
        }
        // Declining is allowed (the chunk is then stored losslessly), but
        // most of these cases must take the lossy path.
        assert!(declined < 120, "{declined} of 240 declined");
    }

    #[test]
    fn hostile_streams_are_refused() {
        let v: Vec<f32> = (0..1000).map(|i| (i as f32 * 0.1).sin()).collect();
        let data = bytes32(&v);
        let stored = encode(4, &data, &[10, 100], 1e-3, &[], 3, Predictor::Lorenzo).unwrap();
        let mut out = vec![0u8; data.len()];
        decode(4, &stored, &mut out).unwrap();
        assert!(decode(4, &stored[..HEADER_LEN - 1], &mut out).is_err());
        assert!(decode(4, &stored[..stored.len() - 1], &mut out).is_err());
        assert!(decode(8, &stored, &mut out).is_err(), "wrong element count for f64");
        assert!(decode(2, &stored, &mut out).is_err());
        for (at, value) in [(0, 2u8), (1, 3), (2, 1), (11, 0xff), (12, 0xff), (16, 2)] {
            let mut bad = stored.clone();
            bad[at] = value;
            assert!(decode(4, &bad, &mut out).is_err(), "byte {at} = {value}");
        }
        let mut short = vec![0u8; data.len() - 4];
        assert!(decode(4, &stored, &mut short).is_err());
        // Every single-byte change either is refused or decodes without panicking.
        for at in 0..stored.len() {
            let mut bad = stored.clone();
            bad[at] ^= 0x5a;
            let _ = decode(4, &bad, &mut out);
        }
    }

    /// An outlier's raw little-endian bytes (4 or 8) as binary64 (SPEC.md 6.6.1).
    pub(super) fn spec_outlier(b: &[u8]) -> f64 {
        if b.len() == 4 {
            f64::from(f32::from_le_bytes(b.try_into().unwrap()))
        } else {
            f64::from_le_bytes(b.try_into().unwrap())
        }
    }

    /// The value of code `c` (not 0) predicted as `p` (SPEC.md 6.6.1), in
    /// binary64, rounded to the element type of `esize` bytes.
    pub(super) fn spec_value(c: u64, p: f64, t: f64, esize: usize) -> f64 {
        let z = c - 1;
        let q: i64 = if z % 2 == 0 { (z / 2) as i64 } else { -(z.div_ceil(2) as i64) };
        let y = p + q as f64 * (2.0 * t);
        if esize == 4 {
            f64::from(y as f32)
        } else {
            y
        }
    }

    /// A decoder written from SPEC.md 6.6 alone, on an independent zstd
    /// (ruzstd) and plain 3-D indexing with explicit zero neighbours,
    /// decodes what the encoder wrote to the same bits as [`decode`].
    fn spec_decode(stored: &[u8], esize: usize) -> Vec<f64> {
        use ruzstd::decoding::FrameDecoder;
        let u32_le = |at: usize| u32::from_le_bytes(stored[at..at + 4].try_into().unwrap()) as usize;
        let (w, t, k) = (usize::from(stored[1]), f64::from_le_bytes(stored[4..12].try_into().unwrap()), u32_le(12));
        let (n0, n1, n2) = (u32_le(16), u32_le(20), u32_le(24));
        let e = n0 * n1 * n2;
        let mut payload = Vec::with_capacity(e * (w + esize));
        FrameDecoder::new().decode_all_to_vec(&stored[28..], &mut payload).unwrap();
        assert_eq!(payload.len(), e * w + k * esize);
        let mut out = vec![0f64; e];
        let mut next_outlier = e * w;
        let r = |out: &[f64], i: isize, j: isize, l: isize| -> f64 {
            if i < 0 || j < 0 || l < 0 {
                return 0.0;
            }
            let x = out[(i as usize * n1 + j as usize) * n2 + l as usize];
            if x.is_finite() {
                x
            } else {
                0.0
            }
        };
        for i in 0..n0 as isize {
            for j in 0..n1 as isize {
                for l in 0..n2 as isize {
                    let m = (i as usize * n1 + j as usize) * n2 + l as usize;
                    let c = (0..w).fold(0u64, |c, b| c | u64::from(payload[b * e + m]) << (8 * b));
                    let v = if c == 0 {
                        next_outlier += esize;
                        spec_outlier(&payload[next_outlier - esize..next_outlier])
                    } else {
                        let p = r(&out, i - 1, j, l) + r(&out, i, j - 1, l)
                            - r(&out, i - 1, j - 1, l)
                            - r(&out, i - 1, j, l - 1)
                            - r(&out, i, j - 1, l - 1)
                            + r(&out, i - 1, j - 1, l - 1)
                            + r(&out, i, j, l - 1);
                        spec_value(c, p, t, esize)
                    };
                    out[m] = v;
                }
            }
        }
        assert_eq!(next_outlier, payload.len());
        out
    }

    #[test]
    fn a_decoder_from_the_spec_agrees() {
        let mut rng = Rng(99);
        let v: Vec<f64> = (0..6 * 7 * 50)
            .map(|i| match rng.next() % 50 {
                0 => f64::NAN,
                1 => f64::NEG_INFINITY,
                2 => 1e200,
                _ => (i as f64 * 0.05).sin() * 100.0 + rng.unit(),
            })
            .collect();
        for (tol, shape) in [(0.5, [6usize, 7, 50]), (1e-3, [6, 7, 50]), (1e-6, [42, 1, 50])] {
            let data = bytes64(&v);
            let stored = encode(8, &data, &shape, tol, &[], 3, Predictor::Lorenzo).unwrap();
            let mut back = vec![0u8; data.len()];
            decode(8, &stored, &mut back).unwrap();
            let ours: Vec<u64> = back.chunks_exact(8).map(|b| f64::from_ne_bytes(b.try_into().unwrap()).to_bits()).collect();
            let theirs: Vec<u64> = spec_decode(&stored, 8).iter().map(|x| x.to_bits()).collect();
            assert_eq!(ours, theirs, "tolerance {tol}");
            let v32: Vec<f32> = v.iter().map(|&x| x as f32).collect();
            let data = bytes32(&v32);
            let stored = encode(4, &data, &shape, tol, &[], 3, Predictor::Lorenzo).unwrap();
            let mut back = vec![0u8; data.len()];
            decode(4, &stored, &mut back).unwrap();
            let ours: Vec<u64> = back.chunks_exact(4).map(|b| f64::from(f32::from_ne_bytes(b.try_into().unwrap())).to_bits()).collect();
            let theirs: Vec<u64> = spec_decode(&stored, 4).iter().map(|x| x.to_bits()).collect();
            assert_eq!(ours, theirs, "float32, tolerance {tol}");
            // The same stream read under other views of its 2100 elements,
            // so that every walk (one axis, one plane, planes; wavefronts
            // of a full and a partial set of rows) meets the C-order one.
            for view in [
                [1, 1, 2100],
                [2100, 1, 1],
                [1, 2100, 1],
                [1, 7, 300],
                [1, 3, 700],
                [6, 7, 50],
                [7, 6, 50],
                [3, 2, 350],
                [50, 42, 1],
                [2, 1050, 1],
            ] {
                let mut other = stored.clone();
                for (k, e) in view.iter().enumerate() {
                    other[16 + 4 * k..20 + 4 * k].copy_from_slice(&(*e as u32).to_le_bytes());
                }
                decode(4, &other, &mut back).unwrap();
                let ours: Vec<u64> = back.chunks_exact(4).map(|b| f64::from(f32::from_ne_bytes(b.try_into().unwrap())).to_bits()).collect();
                let theirs: Vec<u64> = spec_decode(&other, 4).iter().map(|x| x.to_bits()).collect();
                assert_eq!(ours, theirs, "float32, tolerance {tol}, view {view:?}");
            }
        }
    }

    /// On white noise the 1-D view predicts best (each Lorenzo term adds a
    /// noisy neighbour); on a smooth volume, the 3-D one. The encoder keeps
    /// the view it estimates smallest, and the stream says which.
    #[test]
    fn the_encoder_keeps_the_view_that_predicts_best() {
        let view = |stored: &[u8]| [16, 20, 24].map(|at| u32::from_le_bytes(stored[at..at + 4].try_into().unwrap()));
        let mut rng = Rng(3);
        let noise: Vec<f32> = (0..16 * 16 * 16).map(|_| rng.unit() as f32).collect();
        let stored = encode(4, &bytes32(&noise), &[16, 16, 16], 0.01, &[], 3, Predictor::Lorenzo).unwrap();
        assert_eq!(view(&stored), [1, 1, 4096]);
        let smooth: Vec<f32> = (0..16 * 16 * 16)
            .map(|i| ((i / 256) as f32 * 0.3).sin() * ((i / 16 % 16) as f32 * 0.2).cos() * ((i % 16) as f32 * 0.5).sin())
            .collect();
        let stored = encode(4, &bytes32(&smooth), &[16, 16, 16], 1e-4, &[], 3, Predictor::Lorenzo).unwrap();
        assert_eq!(view(&stored), [16, 16, 16]);
        assert_eq!(views_of(lorenzo_shape(&[4, 1, 8, 16])), [[4, 8, 16], [1, 32, 16], [1, 1, 512]]);
        assert_eq!(views_of(lorenzo_shape(&[100])), [[1, 1, 100]; 3]);
    }

    #[test]
    fn shapes_are_viewed_as_three_axes() {
        assert_eq!(lorenzo_shape(&[7]), [1, 1, 7]);
        assert_eq!(lorenzo_shape(&[1, 64, 1, 32]), [1, 64, 32]);
        assert_eq!(lorenzo_shape(&[2, 3, 4, 5, 6]), [24, 5, 6]);
        assert_eq!(lorenzo_shape(&[1, 1]), [1, 1, 1]);
    }
}
