//! The options that shape a new container's variables, as `vds import` and
//! `vds copy` take them: `--codec` (with a tolerance relative to each float
//! variable's value range), `--chunk`, `--partitioning`, `--blocks` and
//! `--lods`, each for every variable or, with `VAR=`, for one.

use crate::args::{u64_list, Args};
use crate::util::{value_f64, Fail};
use vds::{Codec, Compression, DType, LodMethod, Variable, VariableBuilder};

/// What `--codec` asks for.
#[derive(Clone, Copy)]
enum Asked {
    /// This codec.
    Codec(Codec),
    /// The bounded codec with a tolerance of this many percent of each
    /// float variable's value range.
    Percent(f64),
}

/// Parses `none`, `deflate[:LEVEL]`, `zstd[:LEVEL]`, `bounded:TOL` or `bounded:P%`.
fn parse_codec(s: &str) -> Result<Asked, String> {
    let level = |l: &str, range: std::ops::RangeInclusive<u8>| match l.parse::<u8>() {
        Ok(l) if range.contains(&l) => Ok(l),
        _ => Err(format!("level {l:?} is not {} to {}", range.start(), range.end())),
    };
    let codec = match s.split_once(':') {
        None if s == "none" => Codec::NONE,
        None if s == "deflate" => Codec::deflate(1),
        None if s == "zstd" => Codec::zstd(1),
        Some(("deflate", l)) => Codec::deflate(level(l, Compression::DEFLATE_LEVELS)?),
        Some(("zstd", l)) => Codec::zstd(level(l, Compression::ZSTD_LEVELS)?),
        Some(("bounded", t)) => match t.strip_suffix('%') {
            Some(p) => {
                return match p.parse::<f64>() {
                    Ok(p) if p > 0.0 && p <= 100.0 => Ok(Asked::Percent(p)),
                    _ => Err(format!("relative tolerance {t:?} is not a percentage in (0, 100]")),
                }
            }
            None => match t.parse::<f64>() {
                Ok(t) if t > 0.0 && t <= 1e300 => Codec::bounded(t),
                _ => return Err(format!("tolerance {t:?} is not a number in (0, 1e300]")),
            },
        },
        _ => return Err("expected none, deflate[:LEVEL], zstd[:LEVEL], bounded:TOL or bounded:P%".into()),
    };
    Ok(Asked::Codec(codec))
}

/// `codec` for a variable that must be stored exactly: a bounded codec
/// becomes zstd at its level.
fn lossless(codec: Codec) -> Codec {
    match codec.compression {
        Compression::Bounded { level, .. } => Codec::zstd(level),
        _ => codec,
    }
}

/// The smallest and largest finite values of a variable (none when it has
/// no finite value): what `--codec bounded:P%` takes P percent of.
#[derive(Clone, Copy, Default)]
pub struct ValueRange(Option<(f64, f64)>);

impl ValueRange {
    /// Takes in one value; NaNs and infinities do not count.
    pub fn add_value(&mut self, x: f64) {
        if x.is_finite() {
            self.0 = Some(self.0.map_or((x, x), |(lo, hi)| (lo.min(x), hi.max(x))));
        }
    }

    /// Takes in `bytes`, values of `dtype` in native byte order, but not
    /// those that `missing` (one per value) marks as missing.
    pub fn add(&mut self, dtype: DType, bytes: &[u8], missing: Option<&[bool]>) {
        for (i, e) in bytes.chunks_exact(dtype.size()).enumerate() {
            if !missing.is_some_and(|m| m[i]) {
                self.add_value(value_f64(dtype, e));
            }
        }
    }
}

/// Whether the bounded codec takes variables of `dtype`.
fn is_float(dtype: DType) -> bool {
    matches!(dtype, DType::Float32 | DType::Float64)
}

/// The codec and chunk options of import and copy.
pub struct Layout {
    codec: Option<Asked>,
    chunks: Vec<ShapeFor>,
    /// Further partitionings, as `chunks`.
    partitionings: Vec<ShapeFor>,
    /// Block shapes inside chunks, as `chunks`.
    blocks: Vec<ShapeFor>,
    lods: Option<(u8, LodMethod)>,
}

/// A shape for one variable (by name) or for any with that many dimensions (None).
type ShapeFor = (Option<String>, Vec<u64>);

/// Parses `VAR=N,N,...` or `N,N,...` for --chunk and --partitioning.
fn shape_option(args: &Args, name: &str) -> Result<Vec<ShapeFor>, Fail> {
    let mut out = Vec::new();
    for c in args.values(name) {
        let (var, shape) = match c.rsplit_once('=') {
            Some((v, s)) => (Some(v.to_string()), s),
            None => (None, c),
        };
        // `--blocks none`: whole chunks (an empty shape, which fits any variable).
        if name == "blocks" && shape == "none" {
            out.push((var, Vec::new()));
            continue;
        }
        let shape = u64_list(shape).map_err(|e| args.usage(format!("--{name} {c:?}: {e}")))?;
        if shape.contains(&0) {
            return Err(args.usage(format!("--{name} {c:?}: a chunk extent must be at least 1")));
        }
        out.push((var, shape));
    }
    Ok(out)
}

/// The shape of `shapes` for variable `name` of `ndim` dimensions: the one
/// naming it, else the last for that many dimensions.
fn shape_for<'a>(shapes: &'a [ShapeFor], name: &str, ndim: usize) -> Option<&'a [u64]> {
    let named = shapes.iter().find(|(v, _)| v.as_deref() == Some(name));
    named.or_else(|| shapes.iter().rev().find(|(v, s)| v.is_none() && (s.len() == ndim || s.is_empty()))).map(|(_, s)| s.as_slice())
}

impl Layout {
    /// Whether `--blocks` names a block shape (or `none`) for variable
    /// `name` of `ndim` dimensions.
    pub fn asks_blocks(&self, name: &str, ndim: usize) -> bool {
        shape_for(&self.blocks, name, ndim).is_some()
    }

    pub fn from(args: &Args) -> Result<Layout, Fail> {
        let mut codec = args.parsed("codec", parse_codec)?;
        if args.flag("no-shuffle") {
            codec = match codec {
                None => Some(Asked::Codec(Codec::deflate(1).with_shuffle(false))),
                Some(Asked::Codec(c)) => Some(Asked::Codec(c.with_shuffle(false))),
                // The bounded codec never shuffles.
                relative => relative,
            };
        }
        let chunks = shape_option(args, "chunk")?;
        let partitionings = shape_option(args, "partitioning")?;
        let blocks = shape_option(args, "blocks")?;
        let method = match args.value("lod-method") {
            None | Some("average") => LodMethod::Average,
            Some("nearest") => LodMethod::Nearest,
            Some(m) => return Err(args.usage(format!("--lod-method {m:?}: expected average or nearest"))),
        };
        let lods = args.parsed("lods", |s| {
            s.parse::<u8>().ok().filter(|n| (1..=vds::MAX_LODS).contains(n)).ok_or(format!("expected 1 to {}", vds::MAX_LODS))
        })?;
        Ok(Layout { codec, chunks, partitionings, blocks, lods: lods.map(|n| (n, method)) })
    }

    /// The codec asked for variable `var` of type `dtype` in `input`, if
    /// any: a bounded codec is for float32 and float64 only, and other types
    /// get zstd at its level, lossless. A relative tolerance (`bounded:P%`)
    /// becomes P percent of the variable's value range, which `range` reads
    /// (called only then); a variable whose finite values are all equal, or
    /// that has none, is stored exactly.
    pub fn codec_for(
        &self,
        input: &str,
        var: &str,
        dtype: DType,
        range: impl FnOnce() -> Result<ValueRange, Fail>,
    ) -> Result<Option<Codec>, Fail> {
        let exact = lossless(Codec::bounded(1.0));
        let percent = match self.codec {
            None => return Ok(None),
            Some(Asked::Codec(c)) => return Ok(Some(if is_float(dtype) { c } else { lossless(c) })),
            Some(Asked::Percent(_)) if !is_float(dtype) => return Ok(Some(exact)),
            Some(Asked::Percent(p)) => p,
        };
        let Some((lo, hi)) = range()?.0 else { return Ok(Some(exact)) };
        let codec = Codec::bounded_relative(percent / 100.0, lo, hi);
        let Compression::Bounded { tolerance, .. } = codec.compression else { return Ok(Some(codec)) };
        // The range is finite, so the tolerance is a number: 0 when every
        // value is the same (nothing to lose), infinite when the width overflows.
        if tolerance == 0.0 {
            Ok(Some(exact))
        } else if tolerance > 1e300 {
            Err(Fail::Error(format!(
                "{input}: variable {var:?}: --codec bounded:{percent}% of its value range {lo} .. {hi} is {tolerance}, \
                 more than the largest tolerance, 1e300 (give one as bounded:TOL)"
            )))
        } else {
            Ok(Some(codec))
        }
    }

    /// The chunk shape asked for a variable of `ndim` dimensions, if any.
    pub fn chunk(&self, name: &str, ndim: usize) -> Option<&[u64]> {
        shape_for(&self.chunks, name, ndim)
    }

    /// The further partitionings asked for a variable, if any were.
    fn partitionings(&self, name: &str, ndim: usize) -> Option<Vec<Vec<u64>>> {
        if self.partitionings.is_empty() {
            return None;
        }
        Some(
            self.partitionings
                .iter()
                .filter(|(v, s)| v.as_deref() == Some(name) || (v.is_none() && s.len() == ndim))
                .map(|(_, s)| s.clone())
                .collect(),
        )
    }

    /// Applies the levels of detail and partitionings asked for (or, when
    /// none were, those of `keep`) to a variable being built.
    pub fn apply(&self, vb: &mut VariableBuilder, ndim: usize, keep: Option<(&Variable, &[&str])>) {
        let name = vb.name().to_string();
        let lod_method = |m: LodMethod| if vb.dtype() == DType::Bool { LodMethod::Nearest } else { m };
        match (self.lods, keep) {
            (Some((n, m)), _) => {
                let m = lod_method(m);
                vb.levels_of_detail(n, &[], m);
            }
            (None, Some((v, axes))) if v.levels_of_detail() > 1 => {
                let lod_axes: Vec<&str> = v.lod_axes().iter().map(|&k| axes[k]).collect();
                vb.levels_of_detail(v.levels_of_detail(), &lod_axes, v.lod_method());
            }
            _ => {}
        }
        let parts = self.partitionings(&name, ndim).or_else(|| keep.map(|(v, _)| v.partitionings()[1..].to_vec())).unwrap_or_default();
        for p in parts {
            vb.partitioning(&p);
        }
        // A source's blocks (or whole chunks) are kept only with its chunk
        // shape; otherwise the library's default applies unless --blocks says.
        let kept = keep.filter(|_| self.chunk(&name, ndim).is_none()).map(|(v, _)| v.block_shape());
        if let Some(b) = shape_for(&self.blocks, &name, ndim).map(|b| (!b.is_empty()).then_some(b)).or(kept) {
            vb.blocks(b);
        }
    }

    /// Fails on a `VAR=` chunk option naming no variable, or one of the
    /// wrong length, and on a relative tolerance for variables (name,
    /// dimensions, type) none of which is float32 or float64.
    pub fn check(&self, vars: &[(String, usize, DType)]) -> Result<(), Fail> {
        if let Some(Asked::Percent(p)) = self.codec {
            if !vars.iter().any(|(_, _, t)| is_float(*t)) {
                let have: Vec<String> = vars.iter().map(|(v, _, t)| format!("{v:?} is {t}")).collect();
                return Err(Fail::Usage(format!(
                    "vds: --codec bounded:{p}%: a relative tolerance is for float32 and float64 variables, and none is here ({})",
                    have.join(", ")
                )));
            }
        }
        for (v, s) in self.chunks.iter().chain(&self.partitionings).chain(&self.blocks) {
            match v {
                Some(v) => match vars.iter().find(|(n, _, _)| n == v) {
                    None => return Err(Fail::Usage(format!("vds: --chunk names variable {v:?}, which does not exist"))),
                    Some((_, n, _)) if *n != s.len() && !s.is_empty() => {
                        return Err(Fail::Usage(format!("vds: --chunk for {v:?} has {} extents, the variable {n} dimensions", s.len())))
                    }
                    _ => {}
                },
                None if !s.is_empty() && !vars.iter().any(|(_, n, _)| *n == s.len()) => {
                    return Err(Fail::Usage(format!("vds: --chunk {s:?} matches no variable's number of dimensions")));
                }
                None => {}
            }
        }
        Ok(())
    }
}
