//! Axes and variables as the rest of the library uses them: shapes, chunk
//! grids, levels of detail, partitionings, masks, quantization and margins,
//! and the stored layers a variable is made of.

use super::{Codec, DType, Scalar, MASK_LAYER};

/// One axis of a dataset: its name, unit, number of samples and the
/// coordinates of its first and last sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub(crate) name: String,
    pub(crate) unit: String,
    pub(crate) samples: u64,
    pub(crate) first: f64,
    pub(crate) last: f64,
    pub(crate) growable: bool,
    pub(crate) max_samples: Option<u64>,
}

impl Axis {
    /// An axis of `samples` samples with coordinates 0, 1, ..., samples - 1 and no unit.
    pub fn new(name: &str, samples: u64) -> Axis {
        Axis {
            name: name.into(),
            unit: String::new(),
            samples,
            first: 0.0,
            last: samples.saturating_sub(1) as f64,
            growable: false,
            max_samples: None,
        }
    }
    /// Makes the axis growable: [`Dataset::resize_axis`](crate::Dataset::resize_axis)
    /// and [`Dataset::append`](crate::Dataset::append) may change its
    /// number of samples later, up to `max_samples` (`None`: no limit but
    /// the format's). Every variable spanning it grows or shrinks with it.
    #[must_use]
    pub fn growable(mut self, max_samples: Option<u64>) -> Axis {
        self.growable = true;
        self.max_samples = max_samples;
        self
    }
    /// Whether the axis may be resized.
    pub fn is_growable(&self) -> bool {
        self.growable
    }
    /// The most samples a growable axis may reach, if limited.
    pub fn max_samples(&self) -> Option<u64> {
        self.max_samples
    }
    /// Sets the unit (e.g. "m", "ms").
    #[must_use]
    pub fn unit(mut self, unit: &str) -> Axis {
        self.unit = unit.into();
        self
    }
    /// Sets the coordinates of the first and last sample (samples are evenly spaced between them).
    #[must_use]
    pub fn coordinates(mut self, first: f64, last: f64) -> Axis {
        self.first = first;
        self.last = last;
        self
    }
    /// The axis name, unique in its dataset.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The unit, possibly empty.
    pub fn unit_str(&self) -> &str {
        &self.unit
    }
    /// The number of samples.
    pub fn samples(&self) -> u64 {
        self.samples
    }
    /// The coordinate of the first sample.
    pub fn first(&self) -> f64 {
        self.first
    }
    /// The coordinate of the last sample.
    pub fn last(&self) -> f64 {
        self.last
    }
}

/// A variable (channel) of a dataset, as described by the descriptor.
#[derive(Debug, Clone)]
pub struct Variable {
    pub(crate) name: String,
    pub(crate) unit: String,
    pub(crate) dtype: DType,
    pub(crate) axes: Vec<usize>,
    pub(crate) shape: Vec<u64>,
    pub(crate) chunk: Vec<u64>,
    /// Chunks along each axis: ceil(shape / chunk).
    pub(crate) grid: Vec<u64>,
    /// The fill value as one little-endian element.
    pub(crate) fill: [u8; 8],
    pub(crate) codec: Codec,
    /// Elements per chunk.
    pub(crate) chunk_elems: usize,
    /// Levels of detail, 1 or more (level 0 is the data itself).
    pub(crate) lods: u8,
    /// Per axis of the variable: whether levels of detail halve it.
    pub(crate) lod_axes: Vec<bool>,
    pub(crate) lod_method: LodMethod,
    /// Chunk shapes of every partitioning; the first is `chunk`.
    pub(crate) parts: Vec<Vec<u64>>,
    /// The stored layers, `lod * parts.len() + partitioning`, each with its
    /// own shape, chunk shape and grid (empty inside a layer).
    pub(crate) layers: Vec<Variable>,
    /// This layer's `lod << 8 | partitioning` (0 for the variable itself).
    pub(crate) layer_id: u16,
    /// The variable's position in the dataset.
    pub(crate) index: usize,
    /// The no-value marker as one little-endian element (of `dtype`), if any.
    pub(crate) no_value: Option<[u8; 8]>,
    /// How values are stored as integers, if they are.
    pub(crate) quant: Option<Quantization>,
    /// The missing-value masks of the layers, in the order of `layers`
    /// (empty unless the variable keeps a mask).
    pub(crate) masks: Vec<Variable>,
    /// Samples each stored chunk of this layer carries before and after its
    /// own box along every axis (the first partitioning's bricks only).
    pub(crate) margin: [u64; 2],
    /// The block shape inside each stored chunk (the first partitioning's
    /// layers only), if the chunks are made of blocks.
    pub(crate) blocks: Option<Vec<u64>>,
}

/// Quantized storage: values of a float variable kept as `storage`
/// integers q, standing for `min + q * (max - min) / qmax` (SPEC.md 3.8).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Quantization {
    /// The integer type stored: uint8 or uint16.
    pub storage: DType,
    /// The value of q = 0.
    pub min: f64,
    /// The value of q = qmax (255 or 65535).
    pub max: f64,
}

impl Quantization {
    /// The largest stored integer.
    pub fn qmax(&self) -> f64 {
        if self.storage == DType::UInt8 {
            255.0
        } else {
            65535.0
        }
    }
    /// The difference between two neighbouring representable values.
    pub fn step(&self) -> f64 {
        (self.max - self.min) / self.qmax()
    }
    /// The stored integer of `x`: `round((x - min) / step)` (halves away
    /// from zero), clamped to `0..=qmax`; NaN is 0.
    pub fn quantize(&self, x: f64) -> u16 {
        let q = ((x - self.min) / self.step()).round();
        if q.is_nan() {
            0
        } else {
            q.clamp(0.0, self.qmax()) as u16
        }
    }
    /// The value a stored integer stands for, in double precision.
    pub fn value(&self, q: u16) -> f64 {
        self.min + f64::from(q) * self.step()
    }
}

/// How a level of detail is computed from the level below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LodMethod {
    /// The mean of the (up to 2^d) values a sample covers; integers are
    /// rounded to the nearest, halves away from zero. For continuous data.
    Average,
    /// The first of the values a sample covers (decimation). For discrete
    /// data such as classes and masks.
    Nearest,
}

impl LodMethod {
    pub(crate) fn name(self) -> &'static str {
        match self {
            LodMethod::Average => "average",
            LodMethod::Nearest => "nearest",
        }
    }
}

/// The extent of `n` samples at level of detail `lod` along a halved axis.
pub(crate) fn lod_extent(n: u64, lod: u8) -> u64 {
    n.div_ceil(1u64 << lod)
}

impl Variable {
    /// One stored layer of this variable: level of detail `lod` in
    /// partitioning `part`, with that level's shape and that partitioning's chunks.
    pub(super) fn make_layer(&self, lod: u8, part: usize) -> Variable {
        let shape: Vec<u64> = self.shape.iter().zip(&self.lod_axes).map(|(&n, &h)| if h { lod_extent(n, lod) } else { n }).collect();
        let chunk = self.parts[part].clone();
        let grid = shape.iter().zip(&chunk).map(|(&n, &c)| n.div_ceil(c)).collect();
        // Only the first partitioning's bricks carry margins.
        let margin = if part == 0 { self.margin } else { [0, 0] };
        let chunk_elems = chunk.iter().map(|&c| c + margin[0] + margin[1]).product::<u64>() as usize;
        let name =
            if lod == 0 && part == 0 { self.name.clone() } else { format!("{} (level of detail {lod}, partitioning {part})", self.name) };
        let mut layer = Variable {
            name,
            shape,
            chunk,
            grid,
            chunk_elems,
            margin,
            blocks: if part == 0 { self.blocks.clone() } else { None },
            // A layer has no layers or partitionings of its own.
            parts: Vec::new(),
            layers: Vec::new(),
            layer_id: u16::from(lod) << 8 | part as u16,
            ..self.clone()
        };
        // A quantized variable's layers hold its stored integers.
        if let Some(q) = self.quant {
            let as_int = |e: &[u8; 8]| {
                let mut out = [0u8; 8];
                let x = match Scalar::from_element(self.dtype, e) {
                    Scalar::Float(x) => x,
                    _ => 0.0,
                };
                // q <= qmax, so for uint8 the second byte is 0.
                out[..2].copy_from_slice(&q.quantize(x).to_le_bytes());
                out
            };
            layer.dtype = q.storage;
            layer.fill = as_int(&self.fill);
            layer.no_value = self.no_value.as_ref().map(as_int);
        }
        layer
    }

    /// The missing-value mask of this layer: bool, same chunks, fill false
    /// (present), keyed with the mask bit in the partitioning byte.
    pub(super) fn mask_of(layer: &Variable) -> Variable {
        Variable {
            name: format!("{} (missing-value mask)", layer.name),
            dtype: DType::Bool,
            fill: [0; 8],
            no_value: None,
            quant: None,
            codec: Codec::deflate(1).with_shuffle(false),
            layer_id: layer.layer_id | u16::from(MASK_LAYER),
            blocks: None,
            ..layer.clone()
        }
    }

    /// The layer a key's level-of-detail and partitioning bytes name: a
    /// data layer, or with the mask bit the mask of one.
    pub(crate) fn stored_layer(&self, lod: u8, part: u8) -> Option<&Variable> {
        if part & MASK_LAYER == 0 {
            return self.layer(lod, part);
        }
        let part = part & !MASK_LAYER;
        if lod >= self.lods || usize::from(part) >= self.parts.len() {
            return None;
        }
        self.masks.get(usize::from(lod) * self.parts.len() + usize::from(part))
    }

    /// The stored layer `lod`, `part`, if it exists.
    pub(crate) fn layer(&self, lod: u8, part: u8) -> Option<&Variable> {
        if lod >= self.lods || usize::from(part) >= self.parts.len() {
            return None;
        }
        self.layers.get(usize::from(lod) * self.parts.len() + usize::from(part))
    }
}

impl Variable {
    /// The variable's name, unique in its dataset.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The unit, possibly empty.
    pub fn unit(&self) -> &str {
        &self.unit
    }
    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// Indices into the dataset's axes, slowest-varying first (SPEC.md section 2).
    pub fn axes(&self) -> &[usize] {
        &self.axes
    }
    /// The extent along each of the variable's axes.
    pub fn shape(&self) -> &[u64] {
        &self.shape
    }
    /// The chunk shape.
    pub fn chunk_shape(&self) -> &[u64] {
        &self.chunk
    }
    /// The number of chunks along each axis.
    pub fn chunk_grid(&self) -> &[u64] {
        &self.grid
    }
    /// The value read where nothing was written.
    pub fn fill_value(&self) -> Scalar {
        Scalar::from_element(self.dtype, &self.fill)
    }
    /// The codec new chunks are written with.
    pub fn codec(&self) -> Codec {
        self.codec
    }
    /// The number of levels of detail (1: level 0 only).
    pub fn levels_of_detail(&self) -> u8 {
        self.lods
    }
    /// The positions (among the variable's axes) that levels of detail halve.
    pub fn lod_axes(&self) -> Vec<usize> {
        self.lod_axes.iter().enumerate().filter(|(_, &h)| h).map(|(i, _)| i).collect()
    }
    /// How levels of detail are computed.
    pub fn lod_method(&self) -> LodMethod {
        self.lod_method
    }
    /// The shape at level of detail `lod`: each halved axis has
    /// ceil(n / 2^lod) samples. `None` beyond the last level.
    pub fn lod_shape(&self, lod: u8) -> Option<Vec<u64>> {
        self.layer(lod, 0).map(|l| l.shape.clone())
    }
    /// The value that marks a missing sample, if the variable declares one.
    pub fn no_value(&self) -> Option<Scalar> {
        self.no_value.map(|b| Scalar::from_element(self.dtype, &b))
    }
    /// The samples each brick of the first partitioning carries before and
    /// after its own box along every axis (`[0, 0]`: none).
    pub fn margin(&self) -> [u64; 2] {
        self.margin
    }
    /// The shape of the blocks each stored chunk is made of (format 1.5),
    /// if it is: a read then decodes only the blocks it touches.
    pub fn block_shape(&self) -> Option<&[u64]> {
        self.blocks.as_deref()
    }
    /// The block grid of this layer's stored chunks, if they are made of blocks.
    pub(crate) fn block_grid(&self) -> Option<crate::codec::blocks::BlockGrid> {
        self.blocks.as_ref().map(|b| crate::codec::blocks::BlockGrid::new(&self.chunk, b))
    }
    /// Whether the codec is the bounded one (SPEC.md 6.6).
    pub(crate) fn is_bounded(&self) -> bool {
        matches!(self.codec.compression, crate::spec::Compression::Bounded { .. })
    }
    /// The shape of a stored chunk of the first partitioning: the chunk
    /// shape plus both margins.
    pub(crate) fn stored_chunk(&self) -> Vec<u64> {
        (0..self.chunk.len()).map(|d| self.stored_extent(d)).collect()
    }
    /// Axis `d` of [`Variable::stored_chunk`], without collecting the rest.
    pub(crate) fn stored_extent(&self, d: usize) -> u64 {
        self.chunk[d] + self.margin[0] + self.margin[1]
    }
    /// Whether the variable keeps a missing-value bitmask.
    pub fn has_mask(&self) -> bool {
        !self.masks.is_empty()
    }
    /// How the values are stored as integers, if they are quantized.
    pub fn quantization(&self) -> Option<Quantization> {
        self.quant
    }
    /// The chunk shape of every partitioning; the first is [`Variable::chunk_shape`].
    pub fn partitionings(&self) -> &[Vec<u64>] {
        &self.parts
    }
    /// The name of a layer in the OpenVDS manner: `Dimensions_` and the
    /// dimensions the partitioning's chunks extend along (OpenVDS numbers
    /// dimensions fastest first, so the variable's last axis is 0), then
    /// `LOD` and the level, e.g. `Dimensions_012LOD0` for bricks and
    /// `Dimensions_01LOD0` for tiles across the two fastest axes. A
    /// partitioning that extends along the same dimensions as an earlier one
    /// gets `_P` and its number appended (`Dimensions_012LOD0_P2`), so that
    /// no two layers of a variable share a name. `prefix` is prepended (the
    /// channel name, for channels other than the first).
    pub fn layer_name(&self, lod: u8, partitioning: u8, prefix: &str) -> Option<String> {
        self.layer(lod, partitioning)?;
        let dims = self.extended_dims(usize::from(partitioning));
        let repeated = (0..usize::from(partitioning)).any(|q| self.extended_dims(q) == dims);
        let suffix = if repeated { format!("_P{partitioning}") } else { String::new() };
        Some(format!("{prefix}Dimensions_{dims}LOD{lod}{suffix}"))
    }
    /// The dimensions (OpenVDS numbering, ascending) along which the chunks
    /// of partitioning `part` extend beyond one sample; an axis of extent 1
    /// counts as extended.
    fn extended_dims(&self, part: usize) -> String {
        let chunk = &self.parts[part];
        let n = chunk.len();
        let mut dims: Vec<usize> = (0..n).filter(|&k| chunk[k] > 1 || self.shape[k] == 1).map(|k| n - 1 - k).collect();
        dims.sort_unstable();
        dims.iter().map(|d| d.to_string()).collect()
    }
    /// Bytes of one element in memory.
    pub(crate) fn esize(&self) -> usize {
        self.dtype.size()
    }
}
