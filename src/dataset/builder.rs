//! Describing a new container: the variable and dataset builders, the
//! descriptor they make, and creating the file.

mod heads;

use super::chunking::{self, default_block_shape};
use super::open::NewHead;
use super::{locking, slots, Dataset, Durability, Layout, DEFAULT_MEMORY_LIMIT};
use crate::error::{invalid, Error, ErrorKind, Result};
use crate::spec::{
    check_name, features_used_by, Axis, AxisJson, Codec, CodecJson, Compression, DType, DescriptorJson, LodJson, LodMethod,
    PartitioningJson, QuantJson, Scalar, SlotJson, VariableJson, FORMAT_MAJOR, FORMAT_MINOR, MAX_DIMS, MAX_VARIABLES,
};
use crate::storage::{open_nonblocking, FileStorage, Storage};
use serde_json::{Map, Value};
use std::fs::{File, OpenOptions as FsOpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A variable to create: name, type, axes, and options.
#[derive(Debug, Clone)]
pub struct VariableBuilder {
    name: String,
    unit: String,
    dtype: DType,
    axes: Vec<String>,
    chunk: Option<Vec<u64>>,
    fill: Scalar,
    codec: Codec,
    attributes: Map<String, Value>,
    lod: Option<(u8, Vec<String>, LodMethod)>,
    partitionings: Vec<Vec<u64>>,
    /// `None`: the default ([`default_block_shape`]); `Some(None)`: whole chunks.
    blocks: Option<Option<Vec<u64>>>,
    fill_set: bool,
    no_value: Option<Scalar>,
    quantization: Option<(DType, f64, f64)>,
    mask: bool,
    margin: [u64; 2],
}

impl VariableBuilder {
    /// A variable `name` of type `dtype` spanning the named axes, slowest first.
    /// Defaults: [`default_chunk_shape`](super::default_chunk_shape) (slabs of at most 4 MiB), fill
    /// value 0 (false for bool), no compression.
    pub fn new(name: &str, dtype: DType, axes: &[&str]) -> VariableBuilder {
        VariableBuilder {
            name: name.into(),
            unit: String::new(),
            dtype,
            axes: axes.iter().map(|a| (*a).to_string()).collect(),
            chunk: None,
            fill: if dtype == DType::Bool { Scalar::Bool(false) } else { Scalar::UInt(0) },
            codec: Codec::NONE,
            attributes: Map::new(),
            lod: None,
            partitionings: Vec::new(),
            blocks: None,
            fill_set: false,
            no_value: None,
            quantization: None,
            mask: false,
            margin: [0, 0],
        }
    }
    /// The element type given to [`VariableBuilder::new`].
    pub fn dtype(&self) -> DType {
        self.dtype
    }
    /// The name given to [`VariableBuilder::new`].
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The chunk shape, one extent per axis of the variable. Without one, a
    /// variable gets [`default_chunk_shape`](super::default_chunk_shape): slabs of whole trailing axes,
    /// at most [`DEFAULT_CHUNK_BYTES`](super::DEFAULT_CHUNK_BYTES) each, so that a variable of at most
    /// 4 MiB is one chunk and whole-array reads and writes are sequential;
    /// ask for bricks (e.g. `[64, 64, 64]`) for access by sub-volumes or by
    /// slices across every axis.
    pub fn chunk(&mut self, shape: &[u64]) -> &mut VariableBuilder {
        self.chunk = Some(shape.to_vec());
        self
    }
    /// The value read where nothing was written.
    pub fn fill(&mut self, value: impl Into<Scalar>) -> &mut VariableBuilder {
        self.fill = value.into();
        self.fill_set = true;
        self
    }
    /// The codec of new chunks.
    pub fn codec(&mut self, codec: Codec) -> &mut VariableBuilder {
        self.codec = codec;
        self
    }
    /// The unit of the values.
    pub fn unit(&mut self, unit: &str) -> &mut VariableBuilder {
        self.unit = unit.into();
        self
    }
    /// A free-form JSON attribute of the variable.
    pub fn attribute(&mut self, key: &str, value: impl Into<Value>) -> &mut VariableBuilder {
        self.attributes.insert(key.into(), value.into());
        self
    }

    /// Keeps `levels` levels of detail (1 to [`MAX_LODS`](crate::MAX_LODS);
    /// level 0 is the data): level k halves each of the named axes k times
    /// (ceil(n / 2^k) samples; no names: every axis). They are computed from
    /// level 0 by `method` at each commit, for the chunks that changed.
    pub fn levels_of_detail(&mut self, levels: u8, axes: &[&str], method: LodMethod) -> &mut VariableBuilder {
        let axes = if axes.is_empty() { self.axes.clone() } else { axes.iter().map(|a| (*a).to_string()).collect() };
        self.lod = Some((levels, axes, method));
        self
    }
    /// Stores the data a second (third, ...) time in chunks of `chunk`:
    /// for instance 2-D tiles `[1, 256, 256]` next to bricks `[64, 64, 64]`,
    /// so that a slice across the tiles' plane reads one tile layer. Every
    /// write goes to the first partitioning; the others (at every level of
    /// detail) are brought up to date at commit.
    pub fn partitioning(&mut self, chunk: &[u64]) -> &mut VariableBuilder {
        self.partitionings.push(chunk.to_vec());
        self
    }

    /// Declares the value that marks a missing sample (and, unless a fill
    /// value is set, makes it the fill value). Chunks entirely of no-value
    /// are index entries only, and levels of detail average only the
    /// samples that are not no-value.
    pub fn no_value(&mut self, value: impl Into<Scalar>) -> &mut VariableBuilder {
        self.no_value = Some(value.into());
        self
    }
    /// Stores a float variable as `storage` integers (`DType::UInt8` or
    /// `DType::UInt16`, 1/4 or 1/2 of float32's size) over the value range
    /// `min..=max`: writes round each value to the nearest of the
    /// 256 (65536) evenly spaced values from min to max, clamping outside
    /// the range (SPEC.md 3.8). Reads return those values, or the stored
    /// integers when read as `storage`.
    pub fn quantization(&mut self, storage: DType, min: f64, max: f64) -> &mut VariableBuilder {
        self.quantization = Some((storage, min, max));
        self
    }

    /// Gives each brick (each chunk of the first partitioning, at every
    /// level of detail) a margin: copies of the `negative` samples before and
    /// the `positive` samples after its box along every axis (at most
    /// [`MAX_MARGIN`](crate::MAX_MARGIN)), so that a filter or an
    /// interpolation can read a brick with its neighbourhood from one chunk
    /// ([`Dataset::read_brick`]). Writes keep every copy up to date.
    pub fn margin(&mut self, negative: u64, positive: u64) -> &mut VariableBuilder {
        self.margin = [negative, positive];
        self
    }
    /// Keeps a missing-value bitmask beside the values, as the ds format
    /// does, for types whose every bit pattern is a valid value: see
    /// [`Dataset::write_masked`] and [`Dataset::read_mask`]. Plain writes
    /// mark what they write as present.
    pub fn missing_mask(&mut self, on: bool) -> &mut VariableBuilder {
        self.mask = on;
        self
    }
    /// Makes each stored chunk (of the first partitioning, at every level
    /// of detail) out of blocks of this shape, each encoded on its own with
    /// the variable's codec (format 1.5, SPEC.md 6.5): a read that touches
    /// part of a chunk then reads and decodes only the blocks it overlaps,
    /// so a trace or a small box through large bricks costs a few blocks
    /// instead of a whole brick. Each axis takes 1 to its chunk extent;
    /// not for bool variables, with margins, or with the bounded codec's
    /// Lorenzo predictor (with its interpolation predictor, format 1.6,
    /// each block is a bounded stream of its own). `None` stores whole chunks.
    ///
    /// Without a call, a variable whose codec is deflate or zstd gets
    /// [`default_block_shape`] of its chunk shape (blocks of at most
    /// 128 KiB inside chunks of 1 MiB or more; none in smaller chunks), unless
    /// it is bool or has margins; other variables store whole chunks.
    pub fn blocks(&mut self, shape: Option<&[u64]>) -> &mut VariableBuilder {
        self.blocks = Some(shape.map(<[u64]>::to_vec));
        self
    }

    /// The block shape the variable is created with: the one asked for, or
    /// the default (see [`VariableBuilder::blocks`]).
    fn block_shape(&self, chunk: &[u64]) -> Option<Vec<u64>> {
        match &self.blocks {
            Some(asked) => asked.clone(),
            None => {
                let compressed = matches!(self.codec.compression, Compression::Deflate { .. } | Compression::Zstd { .. });
                let stored = self.quantization.map_or(self.dtype, |q| q.0);
                (compressed && self.dtype != DType::Bool && self.margin == [0, 0])
                    .then(|| default_block_shape(chunk, stored.size()))
                    .flatten()
            }
        }
    }

    fn to_json(&self, axes: &[Axis]) -> Result<VariableJson> {
        let chunk = match &self.chunk {
            Some(c) => c.clone(),
            None => {
                let shape: Vec<u64> = self.axes.iter().map(|name| axes.iter().find(|a| &a.name == name).map_or(1, |a| a.samples)).collect();
                chunking::default_chunk_shape(&shape, self.dtype.size())
            }
        };
        let fill = match self.no_value {
            Some(nv) if !self.fill_set => nv,
            _ => self.fill,
        };
        // Checked here so that the error is an invalid argument, not a corrupt descriptor.
        fill.to_element(self.dtype).map_err(|e| invalid(format!("variable {:?}: fill value: {e}", self.name)))?;
        let blocks = self.block_shape(&chunk);
        Ok(VariableJson {
            name: self.name.clone(),
            unit: self.unit.clone(),
            dtype: self.dtype.name().into(),
            axes: self.axes.clone(),
            chunk,
            fill: fill.to_json(),
            codec: CodecJson::from_codec(self.codec),
            attributes: self.attributes.clone(),
            lod: self.lod.as_ref().filter(|l| l.0 != 1).map(|(levels, axes, method)| LodJson {
                levels: *levels,
                axes: axes.clone(),
                method: method.name().into(),
                extra: Map::new(),
            }),
            partitionings: self.partitionings.iter().map(|c| PartitioningJson { chunk: c.clone(), extra: Map::new() }).collect(),
            no_value: self.no_value.map(Scalar::to_json),
            quantization: self.quantization.map(|(storage, min, max)| QuantJson {
                storage: storage.name().into(),
                range: [min, max],
                extra: Map::new(),
            }),
            mask: self.mask,
            margin: (self.margin != [0, 0]).then_some(self.margin),
            blocks,
            extra: Map::new(),
        })
    }
}

/// Describes a new container; [`DatasetBuilder::create`] writes it.
///
/// ```
/// use vds::{Axis, Codec, DType, DatasetBuilder, Order, Region, VariableBuilder};
/// # let dir = std::env::temp_dir().join(format!("vds-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// # let path = dir.join("builder.vds");
/// # let _ = std::fs::remove_file(&path);
/// let mut ds = DatasetBuilder::new()
///     .axis(Axis::new("inline", 100).unit("m"))
///     .axis(Axis::new("sample", 50).unit("ms").coordinates(0.0, 196.0))
///     .variable(VariableBuilder::new("amplitude", DType::Float32, &["inline", "sample"])
///         .chunk(&[32, 32])
///         .codec(Codec::deflate(6)))
///     .attribute("survey", "North Sea")
///     .create(&path)?;
/// let values: Vec<f32> = (0..100 * 50).map(|i| i as f32).collect();
/// ds.write("amplitude", &Region::full(&[100, 50])?, Order::C, &values)?;
/// ds.close()?;
/// # Ok::<(), vds::Error>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct DatasetBuilder {
    axes: Vec<Axis>,
    variables: Vec<VariableBuilder>,
    slots: Vec<String>,
    attributes: Map<String, Value>,
    overwrite: bool,
    durability: Durability,
    layout: Layout,
}

impl DatasetBuilder {
    /// An empty description.
    pub fn new() -> DatasetBuilder {
        DatasetBuilder::default()
    }
    /// Adds an axis (slowest-varying first).
    pub fn axis(&mut self, axis: Axis) -> &mut DatasetBuilder {
        self.axes.push(axis);
        self
    }
    /// Adds a variable.
    pub fn variable(&mut self, var: &VariableBuilder) -> &mut DatasetBuilder {
        self.variables.push(var.clone());
        self
    }
    /// The axis added under `name`, to change it.
    pub fn axis_mut(&mut self, name: &str) -> Option<&mut Axis> {
        self.axes.iter_mut().find(|a| a.name == name)
    }
    /// The variable added under `name`, to change its options.
    pub fn variable_mut(&mut self, name: &str) -> Option<&mut VariableBuilder> {
        self.variables.iter_mut().find(|v| v.name == name)
    }
    /// Adds an external-file slot (numbered from 1 in the order added): a file
    /// of that name, relative to the container's directory, that can hold chunks.
    pub fn external_slot(&mut self, name: &str) -> &mut DatasetBuilder {
        self.slots.push(name.into());
        self
    }
    /// A free-form JSON attribute of the dataset.
    pub fn attribute(&mut self, key: &str, value: impl Into<Value>) -> &mut DatasetBuilder {
        self.attributes.insert(key.into(), value.into());
        self
    }
    /// Replace existing files instead of failing with `AlreadyExists`.
    pub fn overwrite(&mut self, yes: bool) -> &mut DatasetBuilder {
        self.overwrite = yes;
        self
    }
    /// When commits reach the disk.
    pub fn durability(&mut self, d: Durability) -> &mut DatasetBuilder {
        self.durability = d;
        self
    }
    /// How the container is laid out: [`Layout::Auto`] (the default) gives
    /// a container whose variables declare at most [`COMPACT_LIMIT`](super::COMPACT_LIMIT) bytes
    /// the compact layout of format 1.4 (a one-value file of a few hundred
    /// bytes), and a larger one the aligned layout every 1.x reader reads.
    pub fn layout(&mut self, layout: Layout) -> &mut DatasetBuilder {
        self.layout = layout;
        self
    }

    fn descriptor(&self) -> Result<DescriptorJson> {
        let axes_json = self
            .axes
            .iter()
            .map(|a| AxisJson {
                name: a.name.clone(),
                unit: a.unit.clone(),
                samples: a.samples,
                first: a.first,
                last: a.last,
                growable: a.growable,
                max_samples: a.max_samples,
                extra: Map::new(),
            })
            .collect();
        let variables = self.variables.iter().map(|v| v.to_json(&self.axes)).collect::<Result<Vec<_>>>()?;
        // Each feature the variables use, in its list (SPEC.md 3.4).
        let features = features_used_by(&variables);
        let d = DescriptorJson {
            format: "vds".into(),
            version: [FORMAT_MAJOR, FORMAT_MINOR],
            features,
            axes: axes_json,
            variables,
            slots: self.slots.iter().map(|s| SlotJson { name: s.clone(), id: None, length: None, extra: Map::new() }).collect(),
            attributes: self.attributes.clone(),
            extra: Map::new(),
        };
        Ok(d)
    }

    /// The new container's head, checked to read back before any file is
    /// touched: a copy of the one made last for the same description
    /// ([`heads`]), or made anew.
    fn new_head(&self) -> Result<NewHead> {
        if let Some(head) = heads::find(self) {
            return Ok(head);
        }
        let head = self.make_head()?;
        heads::keep(self, &head);
        Ok(head)
    }

    /// [`DatasetBuilder::new_head`] made anew.
    fn make_head(&self) -> Result<NewHead> {
        let desc = self.descriptor()?;
        // The names `set_attribute` takes, and no others: an attribute made here can be changed later.
        let named = desc
            .attributes
            .keys()
            .map(|k| (None, k))
            .chain(desc.variables.iter().flat_map(|v| v.attributes.keys().map(move |k| (Some(&v.name), k))));
        for (var, key) in named {
            check_name("attribute", key).map_err(|why| invalid(var.map_or(why.clone(), |v| format!("variable {v:?}: {why}"))))?;
        }
        // Within the limits on counts, the layout's choice costs little before
        // validation, and reading the head back validates it (once per schema).
        let counted =
            desc.axes.len() <= MAX_DIMS && desc.variables.len() <= MAX_VARIABLES && desc.variables.iter().all(|v| v.axes.len() <= MAX_DIMS);
        if counted && desc.builder_rules_are_a_files() {
            let compact = self.layout.is_compact_for(&desc);
            return NewHead::unvalidated(desc, compact, DEFAULT_MEMORY_LIMIT);
        }
        desc.validate(ErrorKind::InvalidArgument)?;
        let compact = self.layout.is_compact_for(&desc);
        NewHead::new(desc, compact, DEFAULT_MEMORY_LIMIT)
    }

    /// Creates the container at `path` (and its external-file slots beside
    /// it), writes its first commit, and returns it open for writing.
    ///
    /// # Errors
    /// `InvalidArgument` for an inconsistent description (unknown axis,
    /// chunk shape of the wrong length, fill value that does not fit, ...),
    /// `AlreadyExists` when a file exists and `overwrite` is off, `Io`.
    pub fn create(&self, path: impl AsRef<Path>) -> Result<Dataset> {
        let path = path.as_ref();
        let mut head = self.new_head()?;
        let mut o = FsOpenOptions::new();
        o.read(true).write(true);
        if self.overwrite {
            // Not truncated here: the container is cut only once its writer lock is held.
            o.create(true);
        } else {
            o.create_new(true);
        }
        // Locked on the file the path names once the lock is held: a compaction
        // may rename a new file over it in between.
        let (file, meta) = locking::open_locked(path, true, "creating", || open_nonblocking(path, &mut o.clone()))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        if !self.slots.is_empty() {
            let (mut desc, compact) = head.into_descriptor();
            for (i, s) in self.slots.iter().enumerate() {
                let slot_path = dir.join(s);
                if slot_path == path {
                    return Err(invalid(format!("external-file slot {s:?} is the container itself")));
                }
                // Truncated after the container's lock is held, as the container is,
                // and given a header with a new id (SPEC.md 8.1).
                desc.slots[i] = slots::create_slot_file(&slot_path, s, self.overwrite, slots::KIND_SLOT)?.1;
            }
            head = NewHead::new(desc, compact, DEFAULT_MEMORY_LIMIT)?;
        }
        let storage: Arc<dyn Storage> = Arc::new(FileStorage::new(file));
        let ds = Dataset::initialize(storage, Some(path.to_path_buf()), head, self.durability, meta.len())?;
        if self.durability == Durability::Fsync {
            // The new directory entries must be durable too, or a power loss could lose the files.
            let mut dirs: Vec<PathBuf> = self.slots.iter().filter_map(|s| dir.join(s).parent().map(Path::to_path_buf)).collect();
            dirs.push(dir.to_path_buf());
            dirs.sort();
            dirs.dedup();
            for d in dirs {
                let d = if d.as_os_str().is_empty() { PathBuf::from(".") } else { d };
                File::open(&d).and_then(|f| f.sync_all()).map_err(|e| Error::io(format!("syncing directory {}", d.display()), e))?;
            }
        }
        Ok(ds)
    }

    /// Creates the container in any [`Storage`]. External-file slots are not
    /// available on such a dataset.
    ///
    /// # Errors
    /// As [`DatasetBuilder::create`].
    pub fn create_in(&self, storage: Arc<dyn Storage>) -> Result<Dataset> {
        if !self.slots.is_empty() {
            return Err(invalid("external-file slots need a container on disk"));
        }
        let head = self.new_head()?;
        let old_len = storage.len().map_err(|e| Error::io("reading the length of the store", e))?;
        Dataset::initialize(storage, None, head, self.durability, old_len)
    }
}
