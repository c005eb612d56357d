//! The interpolation predictor of the bounded codec (method 2, SPEC.md
//! 6.6.2): a chunk is reconstructed coarse to fine, each level halving the
//! spacing of the known grid, and each new value is predicted by linear or
//! cubic interpolation between known values along one axis.
//!
//! Lorenzo prediction (method 1) sums seven reconstructed neighbours, so at a
//! loose tolerance it adds up seven quantization errors; interpolation
//! averages two (or four) values of a coarser grid, and on smooth or
//! band-limited data most of its codes are zero. Its predictions read only
//! values reconstructed in earlier passes, so the chain of rounded
//! operations that holds Lorenzo back is absent here.
//!
//! The stream (header, code planes or zero runs, outliers) is described in
//! SPEC.md 6.6.2; [`encode`] and [`decode`] are its two ends.

use super::{code_of, decoded, kept, nearest, quantize_one, reconstruct, zstd, Float, Quantized, MAX_STEPS};

/// First header byte of an interpolation stream on the grid of multiples
/// (format 1.6).
pub(super) const METHOD: u8 = 2;
/// First header byte of one whose grid also holds the last sample of each
/// axis (anchored, format 1.7).
pub(super) const METHOD_ANCHORED: u8 = 3;
/// First header byte of an anchored stream whose coarser levels are
/// quantized with finer steps (graded, format 1.8).
pub(super) const METHOD_GRADED: u8 = 4;
/// Bytes before the zstd frame.
pub(super) const HEADER_LEN: usize = 36;
/// Header flag: cubic (else linear) interpolation.
const CUBIC: u8 = 1;
/// Header flag: codes 1 (value predicted within the step) as zero runs.
const RUNS: u8 = 2;
/// Method 4's header flags: the grade, in bits 2 to 4.
const GRADE: u8 = 0b1_1100;

/// The axis orders of the passes of a level, numbered as in the header.
pub(super) const ORDERS: [[usize; 3]; 6] = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]];
/// Tenths of the codes that must be 1 for the encoder to store runs without
/// trying planes.
const RUNS_ONLY: usize = 8;
/// Elements of the sample on which the encoder chooses order and kind.
const SAMPLE: usize = 16384;
/// The side of that sample in a 3-D view.
const SIDE_3D: usize = 24;

/// Which neighbours along the pass's axis a prediction has (SPEC.md 6.6.2,
/// 6.6.3).
#[derive(Clone, Copy, PartialEq)]
enum Case {
    /// Only the one before: copied.
    Before,
    /// Before and after: their mean.
    Linear,
    /// Two before and two after.
    Cubic,
    /// One before, two after.
    NearStart,
    /// Two before, one after.
    NearEnd,
    /// Method 3: the one before, and the last sample of the axis `dr` after
    /// (closer than the spacing): linear interpolation between them, `w`
    /// being the weight of the last sample.
    Toward { dr: usize, w: f64 },
    /// Method 3: two before and the last sample `dr` after: the quadratic
    /// through them, with weights `l` (3s before, s before, the last).
    Quadratic { dr: usize, l: [f64; 3] },
}

/// The case of a prediction at coordinate `pos`, an odd multiple of `s`,
/// along an axis of extent `nd`; `anchored` for method 3, whose grid holds
/// the axis's last sample.
#[inline(always)]
fn case_of(pos: usize, s: usize, nd: usize, cubic: bool, anchored: bool) -> Case {
    if pos + s >= nd {
        if !anchored {
            return Case::Before;
        }
        // Method 3 visits no element at nd - 1 here, so 0 < dr < s.
        let dr = nd - 1 - pos;
        let (s, d) = (s as f64, dr as f64);
        if cubic && pos >= 3 * s as usize {
            let l = [-d / (2.0 * (3.0 * s + d)), 3.0 * d / (2.0 * (s + d)), 3.0 * s * s / ((d + 3.0 * s) * (d + s))];
            return Case::Quadratic { dr, l };
        }
        return Case::Toward { dr, w: s / (s + d) };
    }
    if !cubic {
        return Case::Linear;
    }
    match (pos >= 3 * s, pos + 3 * s < nd) {
        (true, true) => Case::Cubic,
        (false, true) => Case::NearStart,
        (true, false) => Case::NearEnd,
        (false, false) => Case::Linear,
    }
}

/// Writes to `out[j]` the prediction of element `first + j * step`, all of
/// one `case`, from the values `h` and `3h` elements before
/// and after each along an axis of stride `unit` (SPEC.md 6.6.2 and 6.6.3,
/// their operations in their order). A pass predicts only from values of
/// earlier passes, so a row's predictions are independent of each other and
/// are made together, before any of its elements is visited.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn predict_row<T: Float>(r: &[u8], first: usize, step: usize, h: usize, unit: usize, case: Case, out: &mut [f64]) {
    match case {
        Case::Before => lanes::<T, 1>(r, [first - h], step, out, |[b]| b),
        Case::Linear => lanes::<T, 2>(r, [first - h, first + h], step, out, |[b, a]| (b + a) * 0.5),
        Case::Cubic => lanes::<T, 4>(r, [first - 3 * h, first - h, first + h, first + 3 * h], step, out, |[bb, b, a, aa]| {
            (9.0 * (b + a) - (bb + aa)) * 0.0625
        }),
        Case::NearStart => {
            lanes::<T, 3>(r, [first - h, first + h, first + 3 * h], step, out, |[b, a, aa]| (3.0 * b + 6.0 * a - aa) * 0.125)
        }
        Case::NearEnd => lanes::<T, 3>(r, [first - 3 * h, first - h, first + h], step, out, |[bb, b, a]| (6.0 * b + 3.0 * a - bb) * 0.125),
        Case::Toward { dr, w } => lanes::<T, 2>(r, [first - h, first + dr * unit], step, out, |[b, last]| b + (last - b) * w),
        Case::Quadratic { dr, l } => {
            lanes::<T, 3>(r, [first - 3 * h, first - h, first + dr * unit], step, out, |[bb, b, last]| l[0] * bb + l[1] * b + l[2] * last)
        }
    }
}

/// Writes to `out[j]` `f` of the values at elements `starts[k] + j * step`
/// of `r`, as the predictor keeps them ([`kept`]): contiguous rows (step 1)
/// in a loop the compiler vectorizes.
#[inline(always)]
#[allow(clippy::needless_range_loop)]
fn lanes<T: Float, const K: usize>(r: &[u8], starts: [usize; K], step: usize, out: &mut [f64], f: impl Fn([f64; K]) -> f64) {
    let Some(span) = out.len().checked_sub(1).map(|last| last * step + 1) else { return };
    let mut v: [&[u8]; K] = [&[]; K];
    for k in 0..K {
        v[k] = &r[starts[k] * T::SIZE..(starts[k] + span) * T::SIZE];
    }
    let at = |x: &[u8], j: usize| kept(T::get(&x[j * T::SIZE..(j + 1) * T::SIZE]).wide());
    if step == 1 {
        for (j, o) in out.iter_mut().enumerate() {
            let mut x = [0.0; K];
            for k in 0..K {
                x[k] = at(v[k], j);
            }
            *o = f(x);
        }
    } else {
        for (j, o) in out.iter_mut().enumerate() {
            let mut x = [0.0; K];
            for k in 0..K {
                x[k] = at(v[k], j * step);
            }
            *o = f(x);
        }
    }
}

/// Element `i` of the values `r` of `T` is `y`.
#[inline(always)]
fn put<T: Float>(r: &mut [u8], i: usize, y: T) {
    y.put(&mut r[i * T::SIZE..(i + 1) * T::SIZE]);
}

/// The coordinates along an axis of extent `nd` on the grid of spacing `g`:
/// its multiples, and for method 3 (`anchored`) also the last.
fn grid(nd: usize, g: usize, anchored: bool) -> Vec<usize> {
    let mut v: Vec<usize> = (0..nd).step_by(g).collect();
    if anchored && (nd - 1) % g != 0 {
        v.push(nd - 1);
    }
    v
}

/// What a [`walk`] does with each row of elements: a trait with an inlined
/// method rather than a closure, which the compiler would call per row.
trait Visit {
    /// Elements `first + j * step`, in that order, predicted as `p[j]`, of
    /// level `l`: stores each one's reconstructed value in `r`, where later
    /// predictions read it (as [`kept`]).
    fn row(&mut self, r: &mut [u8], first: usize, step: usize, p: &[f64], l: usize);
}

/// The number of levels of a walk over view `n` (SPEC.md 6.6.2, 6.6.3).
fn levels(n: [usize; 3], anchored: bool) -> usize {
    // Method 3's grid spans the last sample, nd - 1, from the start.
    let widest = n[0].max(n[1]).max(n[2]).saturating_sub(usize::from(anchored));
    if widest <= 1 {
        0
    } else {
        (usize::BITS - (widest - 1).leading_zeros()) as usize
    }
}

/// Visits every element of the 3-D view `n` (C order) in the order of
/// SPEC.md 6.6.2 (method 2) or 6.6.3 (method 3, `anchored`): element 0 with
/// prediction 0, for method 3 the other corners, then for each level, coarse
/// to fine, one pass per axis in `order`, row by row along the last axis.
/// `visit.row` gets each row's elements with their predictions and the
/// number of their level (l for spacing 2^l; the number of levels for
/// element 0 and the corners), and stores their reconstructed values in `r`
/// (one `T` per element, in native order), which later predictions read
/// (as [`kept`]).
#[inline(always)]
fn walk<T: Float>(n: [usize; 3], order: [usize; 3], cubic: bool, anchored: bool, r: &mut [u8], visit: &mut impl Visit) {
    if n.contains(&0) {
        return;
    }
    let stride = [n[1] * n[2], n[2], 1];
    let levels = levels(n, anchored);
    visit.row(r, 0, 1, &[0.0], levels);
    if anchored {
        // The corners: along each axis in turn, the last sample copies the first.
        for (k, &d) in order.iter().enumerate() {
            if n[d] < 2 {
                continue;
            }
            let along = |e: usize| {
                if e == d {
                    vec![n[d] - 1]
                } else if order[..k].contains(&e) {
                    grid(n[e], usize::MAX, true)
                } else {
                    vec![0]
                }
            };
            let h = (n[d] - 1) * stride[d];
            for a in along(0) {
                for b in along(1) {
                    for c in along(2) {
                        let i = a * stride[0] + b * stride[1] + c;
                        let p = kept(T::get(&r[(i - h) * T::SIZE..(i - h + 1) * T::SIZE]).wide());
                        visit.row(r, i, 1, &[p], levels);
                    }
                }
            }
        }
    }
    // The predictions of one row.
    let mut p = vec![0.0; n[2]];
    for level in (0..levels).rev() {
        let s = 1usize << level;
        for (k, &d) in order.iter().enumerate() {
            let nd = n[d];
            // The new coordinates along d (method 3 holds nd - 1 already).
            let news: Vec<usize> = (s..nd - usize::from(anchored)).step_by(2 * s).collect();
            if news.is_empty() {
                continue;
            }
            let spacing = |e: usize| if order[..k].contains(&e) { s } else { 2 * s };
            let along = |e: usize| grid(n[e], spacing(e), anchored);
            let (h, unit) = (s * stride[d], stride[d]);
            if d == 2 {
                // The rows' elements s, 3s, 5s, ..., in runs of one case.
                let mut runs: Vec<(Case, usize)> = Vec::new();
                for &c in &news {
                    let case = case_of(c, s, nd, cubic, anchored);
                    match runs.last_mut() {
                        Some((last, count)) if *last == case => *count += 1,
                        _ => runs.push((case, 1)),
                    }
                }
                for a in along(0) {
                    for b in along(1) {
                        let row = a * stride[0] + b * stride[1];
                        let mut j = 0;
                        for &(case, count) in &runs {
                            predict_row::<T>(r, row + s + j * 2 * s, 2 * s, h, unit, case, &mut p[j..j + count]);
                            j += count;
                        }
                        visit.row(r, row + s, 2 * s, &p[..j], level);
                    }
                }
            } else {
                // The rows' elements on the grid along the last axis: its
                // multiples of g in one stride, then for method 3 the last.
                let g = spacing(2);
                let count = (n[2] - 1) / g + 1;
                let last = (anchored && (n[2] - 1) % g != 0).then_some(n[2] - 1);
                let (first, second) = if d == 0 { (news.clone(), along(1)) } else { (along(0), news.clone()) };
                for &a in &first {
                    for &b in &second {
                        let row = a * stride[0] + b * stride[1];
                        // The same neighbours for the whole row.
                        let case = case_of(if d == 0 { a } else { b }, s, nd, cubic, anchored);
                        predict_row::<T>(r, row, g, h, unit, case, &mut p[..count]);
                        visit.row(r, row, g, &p[..count], level);
                        if let Some(c) = last {
                            predict_row::<T>(r, row + c, 1, h, unit, case, &mut p[..1]);
                            visit.row(r, row + c, 1, &p[..1], level);
                        }
                    }
                }
            }
        }
    }
}

/// The quantization step of each level of a walk over view `n` under grade
/// `g` (SPEC.md 6.6.4; all 2 * `tol` when g is 0): level l's tolerance is
/// tol / min(1 + l * g / 16, 2), so coarser levels, whose errors the finer
/// ones inherit through interpolation, are quantized more finely.
fn steps(n: [usize; 3], anchored: bool, tol: f64, g: u8) -> Vec<f64> {
    (0..=levels(n, anchored)).map(|l| 2.0 * (tol / (1.0 + (l * usize::from(g)) as f64 / 16.0).min(2.0))).collect()
}

/// Codes and outliers of a chunk under one order, kind and grade, in visit
/// order.
#[allow(clippy::too_many_arguments)]
fn quantize<T: Float>(
    data: &[u8],
    n: [usize; 3],
    order: [usize; 3],
    cubic: bool,
    anchored: bool,
    g: u8,
    tol: f64,
    exact: &[u64],
) -> Quantized {
    let steps = steps(n, anchored, tol, g);
    // Any q will do (the check decides): a product is cheaper than a quotient.
    let inverses: Vec<f64> = steps.iter().map(|s| 1.0 / s).collect();
    let elems = data.len() / T::SIZE;
    let mut q = Quantizer::<T> {
        data,
        steps: &steps,
        inverses: &inverses,
        tol,
        exact,
        codes: Vec::with_capacity(elems),
        outliers: Vec::new(),
        _t: std::marker::PhantomData,
    };
    walk::<T>(n, order, cubic, anchored, &mut vec![0; data.len()], &mut q);
    Quantized { n, codes: q.codes, outliers: q.outliers }
}

/// The encoder's visit: each element's code, or its exact value as an outlier.
struct Quantizer<'a, T> {
    data: &'a [u8],
    steps: &'a [f64],
    inverses: &'a [f64],
    tol: f64,
    exact: &'a [u64],
    codes: Vec<u32>,
    outliers: Vec<u8>,
    _t: std::marker::PhantomData<T>,
}

impl<T: Float> Visit for Quantizer<'_, T> {
    #[inline(always)]
    fn row(&mut self, r: &mut [u8], first: usize, step: usize, p: &[f64], l: usize) {
        let (step_l, inverse, tol) = (self.steps[l], self.inverses[l], self.tol);
        let start = self.codes.len();
        self.codes.resize(start + p.len(), 0);
        // The value kept bit for bit that the first loop leaves to the
        // second: the only one, or with none a NaN (which that loop never
        // settles anyway); with several, every element goes to the second.
        let (kept_one, several) = match self.exact {
            [] => (T::narrow(f64::NAN).bits(), false),
            [e] => (*e, false),
            _ => (0, true),
        };
        // First the common case, in a loop without branches whose elements
        // overlap in the processor: a code whose value lands strictly within
        // the bound (a rounded difference below t is an exact one below t),
        // and 0 for everything else. It computes what `quantize_one` does.
        for (j, (&p, code)) in p.iter().zip(&mut self.codes[start..]).enumerate() {
            let i = first + j * step;
            let x = T::get(&self.data[i * T::SIZE..(i + 1) * T::SIZE]);
            let (xw, t) = (x.wide(), (x.wide() - p) * inverse);
            let q = nearest(t);
            let y: T = reconstruct(p, q, step_l);
            // Also false for x or t not finite.
            let fast = (t.abs() <= MAX_STEPS) & ((xw - y.wide()).abs() < tol) & (x.bits() != kept_one) & !several;
            *code = if fast { code_of(q) } else { 0 };
            put(r, i, y);
        }
        // Then the rest in order, as `quantize_one` decides them: values at
        // the bound, outliers, and the values kept bit for bit.
        for (j, code) in self.codes[start..].iter_mut().enumerate() {
            if *code != 0 {
                continue;
            }
            let i = first + j * step;
            let x = T::get(&self.data[i * T::SIZE..(i + 1) * T::SIZE]);
            let y = match quantize_one(x, p[j], step_l, inverse, tol, self.exact) {
                Some((c, y)) => {
                    *code = c;
                    T::narrow(y)
                }
                None => {
                    *code = 0;
                    x.le(&mut self.outliers);
                    x
                }
            };
            put(r, i, y);
        }
    }
}

/// The orders that differ on view `n`: passes along axes of extent 1 are
/// empty, so orders that list the other axes alike visit alike.
fn distinct_orders(n: [usize; 3]) -> Vec<u8> {
    let mut seen: Vec<Vec<usize>> = Vec::new();
    let mut out = Vec::new();
    for (k, order) in ORDERS.iter().enumerate() {
        let live: Vec<usize> = order.iter().copied().filter(|&e| n[e] > 1).collect();
        if !seen.contains(&live) {
            seen.push(live);
            out.push(k as u8);
        }
    }
    out
}

/// The elements of the chunk of view `n` from its first one, `m[e]` along
/// axis `e` at every `by[e]`-th element, and their view `m`: the samples the
/// encoder chooses its form on.
fn gather<T: Float>(data: &[u8], n: [usize; 3], m: [usize; 3], by: [usize; 3]) -> (Vec<u8>, [usize; 3]) {
    let mut sample = Vec::with_capacity(m.iter().product::<usize>() * T::SIZE);
    for a in (0..m[0]).map(|a| a * by[0]) {
        for b in (0..m[1]).map(|b| b * by[1]) {
            let row = (a * n[1] + b) * n[2];
            if by[2] == 1 {
                sample.extend_from_slice(&data[row * T::SIZE..(row + m[2]) * T::SIZE]);
            } else {
                for c in (0..m[2]).map(|c| row + c * by[2]) {
                    sample.extend_from_slice(&data[c * T::SIZE..(c + 1) * T::SIZE]);
                }
            }
        }
    }
    (sample, m)
}

/// The corner of the chunk of view `n` that is at most `side` elements
/// along each axis, and its view.
fn corner<T: Float>(data: &[u8], n: [usize; 3], side: usize) -> (Vec<u8>, [usize; 3]) {
    gather::<T>(data, n, n.map(|e| e.min(side)), [1; 3])
}

/// What the encoder chose for a chunk: the method (its first header byte),
/// the axis order `k` (an index into [`ORDERS`]), the kind, and the grade
/// (method 4 only; else 0).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Form {
    method: u8,
    k: u8,
    cubic: bool,
    g: u8,
}

impl Form {
    /// Whether the grid holds the last sample of each axis (methods 3, 4).
    fn anchored(self) -> bool {
        self.method != METHOD
    }

    /// The codes and outliers of view `n` under this form.
    fn quantize<T: Float>(self, data: &[u8], n: [usize; 3], tol: f64, exact: &[u64]) -> Quantized {
        quantize::<T>(data, n, ORDERS[usize::from(self.k)], self.cubic, self.anchored(), self.g, tol, exact)
    }

    /// The length of the stream of view `n` under this form, zstd level 1
    /// (usize::MAX when it would not be shorter than the view).
    fn length<T: Float>(self, data: &[u8], n: [usize; 3], tol: f64, exact: &[u64]) -> usize {
        frame::<T>(&self.quantize::<T>(data, n, tol, exact), self, tol, 1).map_or(usize::MAX, |s| s.len())
    }
}

/// The form of a chunk of `method`: the order and kind whose codes cost
/// least on a corner of the chunk of about [`SAMPLE`] elements (a smaller
/// corner misjudges the finest levels, which hold most of the codes), and
/// for method 4 the grade of [`grade`] (SPEC.md 6.6.2, 6.6.4).
fn choose<T: Float>(data: &[u8], n: [usize; 3], method: u8, tol: f64, exact: &[u64]) -> Form {
    let live = n.iter().filter(|&&e| e > 1).count();
    let side = [1, SAMPLE, 128, SIDE_3D][live];
    let (sample, m) = corner::<T>(data, n, side);
    let mut form = Form { method, k: 0, cubic: false, g: 0 };
    // The best order by linear interpolation, then the better kind along
    // it: the order matters for both kinds alike. (Method 4 chooses its
    // kind by stream length below and keeps no codes of the orders.)
    let graded = method == METHOD_GRADED;
    let mut best: Option<(f64, u8, Option<Quantized>)> = None;
    for k in distinct_orders(m) {
        let q = Form { k, ..form }.quantize::<T>(&sample, m, tol, exact);
        let c = q.cost();
        if best.as_ref().is_none_or(|b| c < b.0) {
            best = Some((c, k, (!graded).then_some(q)));
        }
    }
    let Some((linear, k, lq)) = best else { return form };
    form.k = k;
    if graded {
        // Judged ungraded, linear looks better than it is: the cubic
        // weights amplify the coarser levels' rounding, which grading
        // removes (on the smooth volume at 0.001 of its range, the ungraded
        // choice made the chunks 1.8x longer). So the kind of method 4 is
        // chosen at grade 2, by the corner's stream length.
        let length = |f: Form| f.length::<T>(&sample, m, tol, exact);
        form.cubic = length(Form { cubic: true, g: 2, ..form }) < length(Form { g: 2, ..form });
        form.g = grade::<T>(data, n, form, tol, exact);
        return form;
    }
    let Some(lq) = lq else { return form };
    let cubic = Form { cubic: true, ..form };
    let cq = cubic.quantize::<T>(&sample, m, tol, exact);
    if lq.codes.iter().filter(|&&c| c == 1).count() * 2 < lq.codes.len() {
        form.cubic = cq.cost() < linear;
    } else {
        // Mostly zero steps: the stream holds runs, whose cost the entropy
        // of the codes misjudges (by 5-8% of a seismic chunk at a loose
        // tolerance), so the kind is chosen by the corner's stream length.
        let length = |q: &Quantized, f: Form| frame::<T>(q, f, tol, 1).map_or(usize::MAX, |s| s.len());
        form.cubic = length(&cq, cubic) < length(&lq, form);
    }
    form
}

/// The grade of a chunk of method 4 under `form`'s order and kind: of 0,
/// 1, 2 and 4, the one whose stream is shortest on the chunk taken at every
/// other element along each axis of four or more. That sample has the
/// chunk's coarser levels, where grading pays or not; a corner of the chunk
/// (as [`choose`] takes for the order) has too few of them and picked
/// grades that made the smooth volume 12% longer at 0.001 of its range.
/// Grade 2 is tried against 0 first, and 4 and 1 only when 2 is shorter:
/// on data that grading does not help (noisy seismic at tight tolerances)
/// two trials decide.
fn grade<T: Float>(data: &[u8], n: [usize; 3], form: Form, tol: f64, exact: &[u64]) -> u8 {
    let (sub, m) = every_other::<T>(data, n);
    let length = |g: u8| Form { g, ..form }.length::<T>(&sub, m, tol, exact);
    let (none, two) = (length(0), length(2));
    if two >= none {
        return 0;
    }
    if length(4) < two {
        4
    } else if length(1) < two {
        1
    } else {
        2
    }
}

/// The chunk of view `n` at every other element along each axis of four or
/// more, and its view.
fn every_other<T: Float>(data: &[u8], n: [usize; 3]) -> (Vec<u8>, [usize; 3]) {
    let by = n.map(|e| if e >= 4 { 2 } else { 1 });
    gather::<T>(data, n, [n[0].div_ceil(by[0]), n[1].div_ceil(by[1]), n[2].div_ceil(by[2])], by)
}

/// The codes as planes of `width` bytes each: byte b of every code, then
/// byte b + 1, ...
fn planes(codes: impl ExactSizeIterator<Item = u32> + Clone, width: usize, out: &mut Vec<u8>) {
    for b in 0..width {
        out.extend(codes.clone().map(|c| (c >> (8 * b)) as u8));
    }
}

/// A run of `ones` codes 1, in bytes: 255 for each whole 255, then the rest.
fn push_run(mut ones: usize, out: &mut Vec<u8>) {
    while ones >= 255 {
        out.push(255);
        ones -= 255;
    }
    out.push(ones as u8);
}

/// Encodes a chunk of view `n` with `method` (2, 3 or 4; SPEC.md 6.6.2 to
/// 6.6.4). None when the stream would not be shorter than the chunk; the
/// caller checks the bound on the decoded bytes.
pub(super) fn encode<T: Float>(data: &[u8], n: [usize; 3], method: u8, tol: f64, exact: &[u64], level: u8) -> Option<Vec<u8>> {
    let form = choose::<T>(data, n, method, tol, exact);
    encode_with::<T>(data, n, form, tol, exact, level)
}

/// [`encode`] in the given form.
fn encode_with<T: Float>(data: &[u8], n: [usize; 3], form: Form, tol: f64, exact: &[u64], level: u8) -> Option<Vec<u8>> {
    frame::<T>(&form.quantize::<T>(data, n, tol, exact), form, tol, level)
}

/// The stream of codes and outliers `q`, made in `form`: the shorter of
/// planes and runs, zstd at `level`. None when it would not be shorter
/// than the chunk.
fn frame<T: Float>(q: &Quantized, form: Form, tol: f64, level: u8) -> Option<Vec<u8>> {
    let Quantized { n, codes, outliers } = q;
    let elems = codes.len();
    let width_of = |max: u32| {
        if max < 1 << 8 {
            1usize
        } else if max < 1 << 16 {
            2
        } else {
            4
        }
    };
    let ones = codes.iter().filter(|&&c| c == 1).count();
    // Plain planes of every code unless nearly all are 1, and, when most
    // are, zero runs; both are compressed when it is not clear which is
    // shorter.
    let mut candidates: Vec<(u8, usize, usize, Vec<u8>)> = Vec::new();
    if ones * 10 < elems * RUNS_ONLY {
        let width = width_of(codes.iter().copied().max().unwrap_or(0));
        let mut payload = Vec::with_capacity(elems * width + outliers.len());
        planes(codes.iter().copied(), width, &mut payload);
        payload.extend_from_slice(outliers);
        candidates.push((0, width, elems, payload));
    }
    if ones * 2 >= elems {
        let others = codes.iter().copied().filter(|&c| c != 1);
        let width = width_of(others.clone().max().unwrap_or(0));
        let mut runs = Vec::new();
        let mut run = 0;
        for &c in codes {
            if c == 1 {
                run += 1;
            } else {
                push_run(run, &mut runs);
                run = 0;
            }
        }
        push_run(run, &mut runs);
        let mut payload = runs;
        planes(others.collect::<Vec<u32>>().into_iter(), width, &mut payload);
        payload.extend_from_slice(outliers);
        candidates.push((RUNS, width, elems - ones, payload));
    }
    let mut best: Option<Vec<u8>> = None;
    for (flags, width, count, payload) in candidates {
        let run_bytes = if flags & RUNS != 0 { payload.len() - count * width - outliers.len() } else { 0 };
        // A form that does not compress leaves the other to be tried.
        let Some(frame) = zstd::compress_shorter(&payload, level).or_else(|| zstd::compress_shorter(&payload, 1)) else {
            continue;
        };
        let mut out = Vec::with_capacity(HEADER_LEN + frame.len());
        let flags = flags | if form.cubic { CUBIC } else { 0 } | form.g << 2;
        out.extend_from_slice(&[form.method, width as u8, flags, form.k]);
        out.extend_from_slice(&tol.to_le_bytes());
        out.extend_from_slice(&u32::try_from(outliers.len() / T::SIZE).ok()?.to_le_bytes());
        for &e in n {
            out.extend_from_slice(&u32::try_from(e).ok()?.to_le_bytes());
        }
        out.extend_from_slice(&u32::try_from(count).ok()?.to_le_bytes());
        out.extend_from_slice(&u32::try_from(run_bytes).ok()?.to_le_bytes());
        out.extend_from_slice(&frame);
        if best.as_ref().is_none_or(|b| out.len() < b.len()) {
            best = Some(out);
        }
    }
    best.filter(|out| out.len() < elems * T::SIZE)
}

/// Decodes an interpolation stream into `out` (native-order elements of
/// `T`); every field is checked against the chunk, and nothing is allocated
/// beyond what `out`'s length implies.
pub(super) fn decode<T: Float>(stored: &[u8], out: &mut [u8]) -> Result<(), String> {
    let elems = out.len() / T::SIZE;
    let h = super::common_header(stored, HEADER_LEN, elems)?;
    let (method, flags) = (stored[0], stored[2]);
    let known = if method == METHOD_GRADED { CUBIC | RUNS | GRADE } else { CUBIC | RUNS };
    if flags & !known != 0 {
        return Err(format!("bounded chunk: unknown interpolation flags {flags:#04x} for method {method}"));
    }
    let order = *ORDERS.get(usize::from(stored[3])).ok_or_else(|| format!("bounded chunk: axis order {} (expected 0 to 5)", stored[3]))?;
    let count = super::u32_at(stored, 28) as usize;
    let run_bytes = super::u32_at(stored, 32) as usize;
    let runs = flags & RUNS != 0;
    if count > elems || (!runs && (count != elems || run_bytes != 0)) || run_bytes > 2 * elems + 2 {
        return Err(format!("bounded chunk: {count} codes and {run_bytes} run bytes for a chunk of {elems} elements"));
    }
    let len = run_bytes + count * h.width + h.outliers * T::SIZE;
    let mut payload = vec![0u8; len];
    zstd::decompress_exact(&stored[HEADER_LEN..], &mut payload)?;
    let (run_part, rest) = payload.split_at(run_bytes);
    let (planes, exact) = rest.split_at(count * h.width);
    let codes = Codes::new(planes, h.width, count, runs.then(|| run_part.iter()))?;
    let anchored = method != METHOD;
    let steps = steps(h.n, anchored, h.tol, (flags & GRADE) >> 2);
    let mut d = Decoder::<T> { codes, exact: exact.chunks_exact(T::SIZE), missing: false, steps: &steps, _t: std::marker::PhantomData };
    walk::<T>(h.n, order, flags & CUBIC != 0, anchored, out, &mut d);
    d.codes.finish(elems)?;
    if d.missing || d.exact.next().is_some() {
        return Err(format!("bounded chunk: {} outliers declared, as many outlier codes", h.outliers));
    }
    Ok(())
}

/// The codes of a stream in visit order (SPEC.md 6.6.2), taken one at a
/// time (or a run at a time) from its planes and zero runs, never expanded
/// into a list: the decoder's memory is the payload and the output, which
/// holds the reconstructed values.
struct Codes<'a> {
    planes: &'a [u8],
    width: usize,
    count: usize,
    /// The run bytes not yet read (None: the stream has no runs).
    runs: Option<std::slice::Iter<'a, u8>>,
    /// Plane codes taken.
    coded: usize,
    /// Codes 1 left in the current run.
    ones: usize,
    /// The first fault met during the walk, reported by `finish`.
    fault: Option<Fault>,
}

/// What `Codes` met that makes the stream corrupt.
#[derive(Clone, Copy)]
enum Fault {
    /// A run that the run bytes end inside.
    OpenRun,
    /// A code asked for past the last.
    Short,
}

impl<'a> Codes<'a> {
    fn new(planes: &'a [u8], width: usize, count: usize, runs: Option<std::slice::Iter<'a, u8>>) -> Result<Codes<'a>, String> {
        let mut codes = Codes { planes, width, count, runs, coded: 0, ones: 0, fault: None };
        codes.ones = codes.run().ok_or("bounded chunk: its run bytes end inside a run")?;
        Ok(codes)
    }

    /// The length of the next run (0 without runs): bytes 255 add 255 each,
    /// and the first byte below 255 adds its value and ends the run. None
    /// when the bytes end first.
    fn run(&mut self) -> Option<usize> {
        let Some(bytes) = self.runs.as_mut() else { return Some(0) };
        let mut ones = 0usize;
        for &b in bytes {
            ones += usize::from(b);
            if b < 255 {
                return Some(ones);
            }
        }
        None
    }

    /// The next element's code; past the last one, or after a run the
    /// bytes end inside, 1 and the fault kept for `finish`.
    #[inline(always)]
    fn next(&mut self) -> u32 {
        if self.ones > 0 {
            self.ones -= 1;
            return 1;
        }
        if self.coded == self.count || self.fault.is_some() {
            self.fault.get_or_insert(Fault::Short);
            return 1;
        }
        let (j, planes, count) = (self.coded, self.planes, self.count);
        let c = (1..self.width).fold(u32::from(planes[j]), |c, b| c | u32::from(planes[b * count + j]) << (8 * b));
        self.coded += 1;
        match self.run() {
            Some(ones) => self.ones = ones,
            None => self.fault = Some(Fault::OpenRun),
        }
        c
    }

    /// The index of the first of the next `len` codes, taken together, when
    /// the stream has no runs and holds them all; else None and nothing
    /// taken.
    #[inline(always)]
    fn take_row(&mut self, len: usize) -> Option<usize> {
        let base = self.coded;
        if self.runs.is_some() || self.fault.is_some() || self.count - base < len {
            return None;
        }
        self.coded += len;
        Some(base)
    }

    /// Whether the walk, over a chunk of `elems` elements, took exactly
    /// every code and run byte.
    fn finish(mut self, elems: usize) -> Result<(), String> {
        let count = self.count;
        match self.fault {
            Some(Fault::OpenRun) => return Err("bounded chunk: its run bytes end inside a run".into()),
            Some(Fault::Short) => return Err(format!("bounded chunk: zero runs and {count} codes do not make its {elems} elements")),
            None => {}
        }
        if self.ones > 0 {
            return Err(format!("bounded chunk: zero runs for more than its {elems} elements"));
        }
        if self.coded < count {
            return Err("bounded chunk: codes left over after the last element".into());
        }
        if self.runs.as_mut().is_some_and(|r| r.next().is_some()) {
            return Err(format!("bounded chunk: zero runs and {count} codes do not make its {elems} elements"));
        }
        Ok(())
    }
}

/// The decoder's visit: each element from its code, or its outlier,
/// straight into the output, which holds the reconstructed values the
/// predictions read.
struct Decoder<'a, T> {
    codes: Codes<'a>,
    exact: std::slice::ChunksExact<'a, u8>,
    /// Set when an outlier code finds no outlier left.
    missing: bool,
    steps: &'a [f64],
    _t: std::marker::PhantomData<T>,
}

impl<T: Float> Decoder<'_, T> {
    /// A row whose codes are the plane codes from `base` on, all of width
    /// `W`: first every element from its code, in a loop whose elements
    /// overlap in the processor, then the outliers (code 0) in order.
    #[inline(always)]
    fn planes_row<const W: usize>(&mut self, r: &mut [u8], first: usize, step: usize, p: &[f64], step_l: f64, base: usize) {
        let (planes, count) = (self.codes.planes, self.codes.count);
        let code = |k: usize| (1..W).fold(u32::from(planes[k]), |c, b| c | u32::from(planes[b * count + k]) << (8 * b));
        let mut outliers = false;
        for (j, &p) in p.iter().enumerate() {
            let c = code(base + j);
            outliers |= c == 0;
            // An outlier's value here is replaced below.
            put(r, first + j * step, decoded::<T>(c, p, step_l));
        }
        if outliers {
            for j in (0..p.len()).filter(|&j| code(base + j) == 0) {
                match self.exact.next() {
                    Some(x) => put(r, first + j * step, T::from_le(x)),
                    None => self.missing = true,
                }
            }
        }
    }
}

impl<T: Float> Visit for Decoder<'_, T> {
    #[inline(always)]
    fn row(&mut self, r: &mut [u8], first: usize, step: usize, p: &[f64], l: usize) {
        let step_l = self.steps[l];
        if let Some(base) = self.codes.take_row(p.len()) {
            match self.codes.width {
                1 => self.planes_row::<1>(r, first, step, p, step_l, base),
                2 => self.planes_row::<2>(r, first, step, p, step_l, base),
                _ => self.planes_row::<4>(r, first, step, p, step_l, base),
            }
            return;
        }
        // Code 1, zero steps: the prediction plus this (+0, so -0 becomes +0).
        let zero = 0.0 * step_l;
        let mut j = 0;
        while j < p.len() {
            // A run of codes 1, taken whole.
            let ones = self.codes.ones.min(p.len() - j);
            if ones > 0 {
                for (k, &p) in p[j..j + ones].iter().enumerate() {
                    put(r, first + (j + k) * step, T::narrow(p + zero));
                }
                self.codes.ones -= ones;
                j += ones;
                continue;
            }
            let i = first + j * step;
            let c = self.codes.next();
            if c == 0 {
                match self.exact.next() {
                    Some(x) => put(r, i, T::from_le(x)),
                    None => self.missing = true,
                }
            } else {
                put(r, i, decoded::<T>(c, p[j], step_l));
            }
            j += 1;
        }
    }
}

#[cfg(test)]
#[allow(clippy::host_endian_bytes)]
mod tests;
