//! From trace headers to a volume: which inline, crossline (and offset)
//! each trace is, the regular grid they fill, the traces missing from it,
//! the order the file has them in, and the survey's world coordinates.
//!
//! Decisions, as a seismic library must make them where the standard is
//! silent:
//! - Numbers along each axis are spaced by the greatest common divisor of
//!   their differences (inlines 10, 20, 40 make 10, 20, 30, 40, with 30
//!   missing); the grid may hold at most 16 times as many cells as there
//!   are traces plus 2^20, so that a wrong header byte position is an error
//!   naming it, not an allocation of the product of two random numbers.
//! - Two traces with the same inline, crossline (and offset) are an error
//!   naming both, never a silent overwrite.
//! - A line whose traces all share one inline number is 2-D: its axes are
//!   the trace position along the line (the crossline field) and samples.
//! - World coordinates are CDP X/Y (bytes 181-188) with the coordinate
//!   scalar applied; where both are 0 and the trace has rev 2's Trace Header
//!   Extension 1, its double-precision CDP X/Y.
//!
//! Memory: the scan keeps 28 bytes per trace (its keys and CDP X/Y, for the
//! fit and its misfit) and 8 bytes per grid cell, about 1 % of a file of
//! 1000-sample traces; nothing else it holds grows with the file.

use crate::error::{Error, ErrorKind, Result};
use crate::reader::{SegyFile, Source};
use crate::trace;

/// Which trace header bytes hold the keys (positions counted from 1;
/// each a 4-byte signed integer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyBytes {
    /// Inline number (default 189; rev 0 files often use 9).
    pub inline: usize,
    /// Crossline number (default 193; rev 0 files often use 21).
    pub crossline: usize,
    /// Offset for pre-stack data (default 37), or `None` for post-stack.
    pub offset: Option<usize>,
    /// Treat the file as one 2-D line even if inline numbers vary.
    pub two_d: bool,
}

impl Default for KeyBytes {
    fn default() -> Self {
        KeyBytes { inline: trace::INLINE, crossline: trace::CROSSLINE, offset: None, two_d: false }
    }
}

impl KeyBytes {
    /// Checks every position leaves room for 4 bytes in a trace header.
    ///
    /// # Errors
    /// `InvalidArgument` naming the position.
    pub fn check(&self) -> Result<()> {
        for (what, p) in [("inline", Some(self.inline)), ("crossline", Some(self.crossline)), ("offset", self.offset)] {
            if let Some(p) = p {
                if !(1..=trace::TRACE_HEADER_BYTES - 3).contains(&p) {
                    return Err(Error::new(
                        ErrorKind::InvalidArgument,
                        format!("{what} byte {p} is not 1 to 237 (a 4-byte field of the 240-byte trace header)"),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// Evenly spaced key values: `first`, `first + step`, ... (`count` of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Line {
    /// The smallest number.
    pub first: i64,
    /// The spacing (at least 1).
    pub step: i64,
    /// How many.
    pub count: u64,
}

impl Line {
    fn index(&self, v: i64) -> u64 {
        ((v - self.first) / self.step) as u64
    }
    /// The last number.
    pub fn last(&self) -> i64 {
        self.first + self.step * (self.count as i64 - 1)
    }
    fn from_values(mut v: Vec<i64>) -> Line {
        v.sort_unstable();
        v.dedup();
        let step = v.windows(2).fold(0i64, |g, w| gcd(g, w[1] - w[0])).max(1);
        let first = v.first().copied().unwrap_or(0);
        let last = v.last().copied().unwrap_or(0);
        Line { first, step, count: ((last - first) / step) as u64 + 1 }
    }
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

/// The order of the traces in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sorting {
    /// Inline by inline (crossline fastest, then offset inside): C order of the grid.
    Inline,
    /// Crossline by crossline.
    Crossline,
    /// Neither.
    Unsorted,
}

impl Sorting {
    /// "inline", "crossline" or "unsorted".
    pub fn name(self) -> &'static str {
        match self {
            Sorting::Inline => "inline",
            Sorting::Crossline => "crossline",
            Sorting::Unsorted => "unsorted",
        }
    }
}

/// World coordinates of the grid, as OpenVDS's SurveyCoordinateSystem:
/// the position of (first inline, first crossline) and the step in world
/// coordinates from one inline number to the next, and one crossline to
/// the next. Fitted by least squares to every live trace's CDP X/Y.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Survey {
    /// World X and Y of the first inline and crossline.
    pub origin: [f64; 2],
    /// World X and Y change from one inline number to the next (per unit of inline number).
    pub inline_spacing: [f64; 2],
    /// World X and Y change per unit of crossline number.
    pub crossline_spacing: [f64; 2],
    /// Largest distance between a trace's CDP X/Y and the fitted grid.
    pub misfit: f64,
}

/// The volume a SEG-Y file's traces make.
#[derive(Debug, Clone)]
pub struct Geometry {
    /// The header bytes the keys came from.
    pub keys: KeyBytes,
    /// Inline numbers (one, for a 2-D line).
    pub inlines: Line,
    /// Crossline numbers (the trace position along a 2-D line).
    pub crosslines: Line,
    /// Offsets, for pre-stack data.
    pub offsets: Option<Line>,
    /// For each grid cell in C order (inline, crossline, offset), the trace
    /// there plus 1, or 0 where no trace is.
    pub cells: Vec<u64>,
    /// Traces in the file (every one has a cell).
    pub traces: u64,
    /// The order of the traces in the file.
    pub sorting: Sorting,
    /// Whether this is a 2-D line.
    pub two_d: bool,
    /// World coordinates, when the CDP X/Y fields span a plane.
    pub survey: Option<Survey>,
}

impl Geometry {
    /// Grid cells (inline x crossline x offset).
    pub fn cell_count(&self) -> u64 {
        self.inlines.count * self.crosslines.count * self.offsets.map_or(1, |o| o.count)
    }
    /// Whether every grid cell has a trace.
    pub fn complete(&self) -> bool {
        self.traces == self.cell_count()
    }

    /// Reads every trace header of `file` and works out the volume, calling
    /// `progress(traces_done)` now and then.
    ///
    /// # Errors
    /// `InvalidArgument` for bad key positions; `Geometry` for a file
    /// without traces, duplicate traces, or numbers that make no grid;
    /// `Io` and `Malformed` from reading.
    pub fn scan<S: Source>(file: &SegyFile<S>, keys: KeyBytes, progress: &mut dyn FnMut(u64) -> bool) -> Result<Geometry> {
        keys.check()?;
        let e = file.binary.endian;
        if file.traces == 0 {
            return Err(Error::new(ErrorKind::Geometry, "the file has no traces"));
        }
        // 12 bytes per trace of at least 241 bytes: bounded by the file.
        let n = usize::try_from(file.traces).map_err(|_| Error::new(ErrorKind::Geometry, "too many traces"))?;
        let mut k: Vec<[i32; 3]> = Vec::new();
        k.try_reserve_exact(n).map_err(|_| Error::new(ErrorKind::Geometry, format!("no memory for {n} trace keys")))?;
        let mut fit = Fit::default();
        let mut coords: Vec<(f64, f64)> = Vec::new();
        let block = 4096u64;
        let mut buf = Vec::new();
        for start in (0..file.traces).step_by(block as usize) {
            let count = block.min(file.traces - start);
            let headers = read_headers(file, start, count, &mut buf)?;
            for (t, h) in (start..).zip(headers.chunks_exact(file.header_bytes as usize)) {
                // Variable-length traces had theirs checked when the file was opened.
                if file.header_bytes > trace::TRACE_HEADER_BYTES as u64 && !file.variable_length() {
                    file.check_extensions(t, file.locate(t)?.0, h)?;
                }
                let il = if keys.two_d { 1 } else { trace::get_i32(h, keys.inline, e) };
                let xl = trace::get_i32(h, keys.crossline, e);
                let off = keys.offset.map_or(0, |p| trace::get_i32(h, p, e));
                k.push([il, xl, off]);
                let scalar = trace::get_i16(h, trace::COORDINATE_SCALAR, e);
                let x = trace::scaled(trace::get_i32(h, trace::CDP_X, e), scalar);
                let y = trace::scaled(trace::get_i32(h, trace::CDP_Y, e), scalar);
                // Rev 2's doubles, where the 32-bit fields say nothing.
                let (x, y) = if x == 0.0 && y == 0.0 { trace::extended_cdp(h, e).unwrap_or((x, y)) } else { (x, y) };
                coords.push((x, y));
            }
            if !progress(start + count) {
                return Err(Error::new(ErrorKind::Io, "interrupted"));
            }
        }
        let inlines = Line::from_values(k.iter().map(|t| i64::from(t[0])).collect());
        let crosslines = Line::from_values(k.iter().map(|t| i64::from(t[1])).collect());
        let offsets = keys.offset.map(|_| Line::from_values(k.iter().map(|t| i64::from(t[2])).collect()));
        let cells = inlines.count as u128 * crosslines.count as u128 * offsets.map_or(1, |o| o.count) as u128;
        let limit = 16 * file.traces as u128 + (1 << 20);
        if cells > limit {
            // The trace that stretches the longer axis most: its largest number there.
            let (axis, pos) = if inlines.count >= crosslines.count { (0, keys.inline) } else { (1, keys.crossline) };
            let worst = (0..k.len()).max_by_key(|&t| k[t][axis]).unwrap_or(0);
            let (at, _) = file.locate(worst as u64)?;
            return Err(Error::new(
                ErrorKind::Geometry,
                format!(
                    "inlines {}..{} (step {}), crosslines {}..{} (step {}){} make {cells} grid cells for {} traces: \
                     trace header bytes {} and {} are probably not the inline and crossline numbers (see --inline-byte, --crossline-byte); \
                     the largest {} number, {}, is this trace's",
                    inlines.first,
                    inlines.last(),
                    inlines.step,
                    crosslines.first,
                    crosslines.last(),
                    crosslines.step,
                    offsets.map_or(String::new(), |o| format!(", offsets {}..{} (step {})", o.first, o.last(), o.step)),
                    file.traces,
                    keys.inline,
                    keys.crossline,
                    ["inline", "crossline"][axis],
                    k[worst][axis]
                ),
            )
            .trace(worst as u64)
            .at(at + pos as u64 - 1));
        }
        let no = offsets.map_or(1, |o| o.count);
        let cell_of = |t: &[i32; 3]| {
            let o = offsets.map_or(0, |o| o.index(i64::from(t[2])));
            (inlines.index(i64::from(t[0])) * crosslines.count + crosslines.index(i64::from(t[1]))) * no + o
        };
        let mut grid: Vec<u64> = Vec::new();
        grid.try_reserve_exact(cells as usize).map_err(|_| Error::new(ErrorKind::Geometry, format!("no memory for {cells} grid cells")))?;
        grid.resize(cells as usize, 0);
        let (mut by_inline, mut by_crossline) = (true, true);
        for (i, t) in k.iter().enumerate() {
            let c = cell_of(t) as usize;
            if grid[c] != 0 {
                let (at, _) = file.locate(i as u64)?;
                let what = if keys.offset.is_some() { format!(", offset {}", t[2]) } else { String::new() };
                return Err(Error::new(
                    ErrorKind::Geometry,
                    format!(
                        "duplicate trace: inline {}, crossline {}{what}, as trace {} (if the numbers are not at trace header bytes {} and {}, \
                         see --inline-byte and --crossline-byte)",
                        t[0], t[1], grid[c], keys.inline, keys.crossline
                    ),
                )
                .trace(i as u64)
                .at(at));
            }
            grid[c] = i as u64 + 1;
            if i > 0 {
                let p = &k[i - 1];
                by_inline &= (p[0], p[1], p[2]) < (t[0], t[1], t[2]);
                by_crossline &= (p[1], p[0], p[2]) < (t[1], t[0], t[2]);
            }
            let (x, y) = coords[i];
            fit.add(inlines.index(i64::from(t[0])) as f64, crosslines.index(i64::from(t[1])) as f64, x, y);
        }
        let sorting = if by_inline {
            Sorting::Inline
        } else if by_crossline {
            Sorting::Crossline
        } else {
            Sorting::Unsorted
        };
        let survey = fit.solve(inlines.step as f64, crosslines.step as f64).map(|mut s| {
            s.misfit = k
                .iter()
                .zip(&coords)
                .map(|(t, &(x, y))| {
                    let (i, j) = ((i64::from(t[0]) - inlines.first) as f64, (i64::from(t[1]) - crosslines.first) as f64);
                    let px = s.origin[0] + i * s.inline_spacing[0] + j * s.crossline_spacing[0];
                    let py = s.origin[1] + i * s.inline_spacing[1] + j * s.crossline_spacing[1];
                    (px - x).hypot(py - y)
                })
                .fold(0.0, f64::max);
            s
        });
        let two_d = keys.two_d || inlines.count == 1;
        Ok(Geometry { keys, inlines, crosslines, offsets, cells: grid, traces: file.traces, sorting, two_d, survey })
    }
}

/// Reads the headers of `count` traces from `start` into `buf`, the
/// standard header and any extensions of each ([`SegyFile::header_bytes`]).
/// Short traces of a fixed-length file are read together (one call for
/// many headers); long ones header by header, to read no more than needed.
fn read_headers<'a, S: Source>(file: &SegyFile<S>, start: u64, count: u64, buf: &'a mut Vec<u8>) -> Result<&'a [u8]> {
    buf.clear();
    let tb = file.trace_bytes();
    let hb = file.header_bytes as usize;
    if !file.variable_length() && tb <= 4 * file.header_bytes {
        let mut all = vec![0u8; (count * tb) as usize];
        file.read_raw_traces(start, count, &mut all)?;
        for t in all.chunks_exact(tb as usize) {
            buf.extend_from_slice(&t[..hb]);
        }
        return Ok(buf);
    }
    for i in start..start + count {
        buf.extend_from_slice(&file.trace_headers(i)?);
    }
    Ok(buf)
}

/// Least-squares fit of x and y to a + b i + c j, accumulated trace by trace.
#[derive(Default)]
struct Fit {
    s: [f64; 6],
    sx: [f64; 3],
    sy: [f64; 3],
}

impl Fit {
    fn add(&mut self, i: f64, j: f64, x: f64, y: f64) {
        let [n, si, sj, sii, sij, sjj] = &mut self.s;
        *n += 1.0;
        *si += i;
        *sj += j;
        *sii += i * i;
        *sij += i * j;
        *sjj += j * j;
        for (acc, v) in [(&mut self.sx, x), (&mut self.sy, y)] {
            acc[0] += v;
            acc[1] += i * v;
            acc[2] += j * v;
        }
    }

    /// The survey, per grid index converted to per key number step.
    fn solve(&self, il_step: f64, xl_step: f64) -> Option<Survey> {
        let [n, si, sj, sii, sij, sjj] = self.s;
        let m = [[n, si, sj], [si, sii, sij], [sj, sij, sjj]];
        let det = det3(&m);
        if det.abs() < 1e-9 * n.max(1.0).powi(3) {
            return None;
        }
        let solve = |b: [f64; 3]| {
            let mut out = [0.0; 3];
            for (c, o) in out.iter_mut().enumerate() {
                let mut mc = m;
                for r in 0..3 {
                    mc[r][c] = b[r];
                }
                *o = det3(&mc) / det;
            }
            out
        };
        let (x, y) = (solve(self.sx), solve(self.sy));
        if x.iter().chain(&y).any(|v| !v.is_finite()) || (x[1] == 0.0 && y[1] == 0.0) || (x[2] == 0.0 && y[2] == 0.0) {
            return None;
        }
        Some(Survey {
            origin: [x[0], y[0]],
            inline_spacing: [x[1] / il_step, y[1] / il_step],
            crossline_spacing: [x[2] / xl_step, y[2] / xl_step],
            misfit: 0.0,
        })
    }
}

fn det3(m: &[[f64; 3]; 3]) -> f64 {
    m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
        + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
}
