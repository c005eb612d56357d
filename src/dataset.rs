//! Datasets: creating, opening, reading, writing and committing a container.

use crate::array::{as_bytes, as_bytes_mut, block_is_constant, copy_block, fill_block, is_one_run, strides, Element, Order, Region, Span};
use crate::cache::{ChunkCache, ChunkId};
use crate::codec;
use crate::commit::{body_start, build_head, choose_slot, slot_offset, slot_size, CommitSlot};
use crate::error::{invalid, Error, ErrorKind, Result};
use crate::hash::xxh64;
use crate::index::{self, Entry, Key, PageReader};
use crate::spec::{
    check_name, check_slot_name, version_line, Axis, AxisJson, Codec, CodecJson, DType, DescriptorJson, FeaturesJson, LodJson, LodMethod,
    PartitioningJson, QuantJson, Scalar, SlotJson, Variable, VariableJson, FEATURE_CHUNK_HASHES, FEATURE_LOD, FEATURE_MARGINS,
    FEATURE_MASK, FEATURE_NO_VALUE, FEATURE_PARTITIONINGS, FEATURE_QUANTIZATION, FEATURE_ZSTD, FORMAT_MAJOR, FORMAT_MINOR,
    MAX_DESCRIPTOR_BYTES,
};
use crate::storage::{open_regular, FileStorage, Storage};
use crate::wire::{self, crc32};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions as FsOpenOptions};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

mod chunking;
mod consistency;
mod fragments;
mod growth;
mod layers;
mod layout;
mod locking;
mod maintenance;
mod quant;
mod slots;
mod writeback;
pub use chunking::{default_chunk_shape, DEFAULT_CHUNK_BYTES};
pub use fragments::MergeReport;
pub use layout::{Layout, COMPACT_LIMIT};
pub use locking::FILE_LOCKING_ENV;
pub use maintenance::{CompactReport, Recovery, Space, VerifyReport};

/// When commits reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Durability {
    /// `commit()` returns after the commit is on stable storage (fsync). The default.
    #[default]
    Fsync,
    /// `commit()` returns after handing the writes to the operating system:
    /// a crash of the process loses nothing committed, but a power loss or
    /// an operating-system crash may lose recent commits or leave the file
    /// unreadable. For scratch files.
    None,
}

/// Where new stored chunks go: the container (slot 0) or external-file slots (1..).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SlotPolicy {
    /// Every chunk into one slot (0 is the container itself). The default is `Fixed(0)`.
    Fixed(u16),
    /// Chunks in turn into each listed slot.
    RoundRobin(Vec<u16>),
    /// Fill the first listed slot until it holds `max_bytes`, then the next; the last takes the rest.
    BySize {
        /// Slots in the order they are filled.
        slots: Vec<u16>,
        /// Bytes a slot may hold before the next one is used.
        max_bytes: u64,
    },
    /// Chunks of variable i into slot `list[i]` (variables past the list into
    /// the container), e.g. each channel in its own file.
    ByVariable(Vec<u16>),
}

/// Opens the storage of an external-file slot, given the slot's name: see
/// [`OpenOptions::slot_storage`].
pub type SlotOpener = dyn Fn(&str) -> std::io::Result<Arc<dyn Storage>> + Send + Sync;

/// Options for opening an existing container.
#[derive(Clone)]
pub struct OpenOptions {
    write: bool,
    durability: Durability,
    memory_limit: Option<u64>,
    allow_external_paths: bool,
    cache_size: Option<u64>,
    file_locking: bool,
    slot_opener: Option<Arc<SlotOpener>>,
    index_prefetch: u32,
}

impl std::fmt::Debug for OpenOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenOptions")
            .field("write", &self.write)
            .field("durability", &self.durability)
            .field("memory_limit", &self.memory_limit)
            .field("allow_external_paths", &self.allow_external_paths)
            .field("cache_size", &self.cache_size)
            .field("file_locking", &self.file_locking)
            .field("slot_opener", &self.slot_opener.is_some())
            .field("index_prefetch", &self.index_prefetch)
            .finish()
    }
}

impl Default for OpenOptions {
    fn default() -> OpenOptions {
        OpenOptions {
            write: false,
            durability: Durability::default(),
            memory_limit: None,
            allow_external_paths: false,
            cache_size: None,
            file_locking: true,
            slot_opener: None,
            index_prefetch: 0,
        }
    }
}

impl OpenOptions {
    /// Read-only, fsync on commit.
    pub fn new() -> OpenOptions {
        OpenOptions::default()
    }
    /// Open for writing (takes the file's writer lock).
    pub fn write(&mut self, write: bool) -> &mut OpenOptions {
        self.write = write;
        self
    }
    /// When commits reach the disk.
    pub fn durability(&mut self, d: Durability) -> &mut OpenOptions {
        self.durability = d;
        self
    }
    /// The memory limit of the opened dataset (see [`Dataset::set_memory_limit`]);
    /// it also bounds parsing the descriptor (SPEC.md 3, "Size and parse memory").
    pub fn memory_limit(&mut self, bytes: u64) -> &mut OpenOptions {
        self.memory_limit = Some(bytes);
        self
    }
    /// Lets external-file slot names point outside the container's directory
    /// (absolute paths, `..`, symbolic links that leave it). Off by default:
    /// slot names come from the file, which may come from anyone.
    pub fn allow_external_paths(&mut self, allow: bool) -> &mut OpenOptions {
        self.allow_external_paths = allow;
        self
    }
    /// The chunk cache size of the opened dataset (see [`Dataset::set_cache_size`]).
    pub fn cache_size(&mut self, bytes: u64) -> &mut OpenOptions {
        self.cache_size = Some(bytes);
        self
    }
    /// Whether opening for writing takes the advisory writer lock (on by
    /// default). Turn it off only on a file system whose locks do not work
    /// (some NFS and Lustre mounts), and only when nothing else can write
    /// the container meanwhile: two writers without the lock corrupt it.
    /// The environment variable `VDS_USE_FILE_LOCKING=FALSE` does the same
    /// for every open and create (SPEC.md 7.1).
    pub fn file_locking(&mut self, on: bool) -> &mut OpenOptions {
        self.file_locking = on;
        self
    }
    /// How a dataset opened with [`OpenOptions::open_storage`] reaches its
    /// external-file slots: `open` gets a slot's name as the descriptor
    /// gives it and returns its storage (read-only datasets only read it).
    /// Unless [`OpenOptions::allow_external_paths`] is set, `open` is only
    /// called with confined relative names (no `..`, no leading `/`), so it
    /// may join them onto the container's location, as the remote reader
    /// joins them onto the container's URL. Each slot's file is still
    /// checked against the id and length the descriptor records.
    pub fn slot_storage(&mut self, open: Arc<SlotOpener>) -> &mut OpenOptions {
        self.slot_opener = Some(open);
        self
    }
    /// Reads the upper levels of the chunk index (every page but the leaves)
    /// when a read-only dataset opens, level by level, each level in one
    /// [`Storage::read_many`] call, as long as the pages read stay within
    /// `pages` (0, the default, reads none; the page cache holds 1024).
    /// Then finding a chunk reads one index page, its leaf. For storage
    /// where each read is a round trip over a network (`vds-remote` asks
    /// for 512): a commit writes the upper pages of the index it rewrites
    /// together, at its end, so one level usually takes one request. A
    /// damaged page is not reported here but by the read that needs it.
    pub fn index_prefetch(&mut self, pages: u32) -> &mut OpenOptions {
        self.index_prefetch = pages;
        self
    }
    fn apply(&self, mut ds: Dataset) -> Dataset {
        if let Some(c) = self.cache_size {
            ds.set_cache_size(c);
        }
        ds.memory_limit = self.limit();
        ds.allow_external_paths = self.allow_external_paths;
        ds.slot_opener.clone_from(&self.slot_opener);
        if self.index_prefetch > 0 && !ds.writable {
            ds.reader.prefetch_branches(&*ds.storage, ds.commit.root, self.index_prefetch as usize);
        }
        ds
    }
    /// Opens the container at `path`.
    ///
    /// # Errors
    /// `NotFound`, `Io`, `Corrupt`, `UnsupportedVersion`/`UnsupportedFeature`
    /// for a file this library cannot read, `ReadOnly` when writing is asked
    /// for a file whose features forbid it, `Locked` when another writer holds it,
    /// `OutOfMemory` when parsing the descriptor could exceed the memory limit.
    pub fn open(&self, path: impl AsRef<Path>) -> Result<Dataset> {
        let path = path.as_ref();
        let file = if self.write {
            locking::open_rw_locked(path, self.file_locking)?
        } else {
            open_regular(path, FsOpenOptions::new().read(true)).map_err(|e| Error::io(format!("opening {}", path.display()), e))?
        };
        let storage: Arc<dyn Storage> = Arc::new(FileStorage::new(file));
        Dataset::load(storage, Some(path.to_path_buf()), self.write, self.durability, self.limit())
            .map(|d| self.apply(d))
            .map_err(|e| e.context(path.display()))
    }
    /// Opens a container held by any [`Storage`] (e.g. [`crate::MemoryStorage`]).
    /// External-file slots are available on such a dataset only through
    /// [`OpenOptions::slot_storage`].
    ///
    /// # Errors
    /// As [`OpenOptions::open`], except `Locked`.
    pub fn open_storage(&self, storage: Arc<dyn Storage>) -> Result<Dataset> {
        Dataset::load(storage, None, self.write, self.durability, self.limit()).map(|d| self.apply(d))
    }
    fn limit(&self) -> u64 {
        self.memory_limit.unwrap_or(DEFAULT_MEMORY_LIMIT)
    }
}

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
    fill_set: bool,
    no_value: Option<Scalar>,
    quantization: Option<(DType, f64, f64)>,
    mask: bool,
    margin: [u64; 2],
}

impl VariableBuilder {
    /// A variable `name` of type `dtype` spanning the named axes, slowest first.
    /// Defaults: [`default_chunk_shape`] (slabs of at most 4 MiB), fill
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
    /// variable gets [`default_chunk_shape`]: slabs of whole trailing axes,
    /// at most [`DEFAULT_CHUNK_BYTES`] each, so that a variable of at most
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
    /// a container whose variables declare at most [`COMPACT_LIMIT`] bytes
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
        // Readers that do not know levels of detail or partitionings read
        // level 0 of the first partitioning correctly, but must not write.
        let mut features = FeaturesJson { compat: vec![FEATURE_CHUNK_HASHES.into()], ..FeaturesJson::default() };
        if variables.iter().any(|v| v.lod.is_some()) {
            features.ro_compat.push(FEATURE_LOD.into());
        }
        if variables.iter().any(|v| !v.partitionings.is_empty()) {
            features.ro_compat.push(FEATURE_PARTITIONINGS.into());
        }
        if variables.iter().any(|v| v.no_value.is_some()) {
            features.compat.push(FEATURE_NO_VALUE.into());
        }
        if variables.iter().any(|v| v.quantization.is_some()) {
            features.incompat.push(FEATURE_QUANTIZATION.into());
        }
        if variables.iter().any(|v| v.mask) {
            features.ro_compat.push(FEATURE_MASK.into());
        }
        if variables.iter().any(|v| v.margin.is_some()) {
            features.incompat.push(FEATURE_MARGINS.into());
        }
        if variables.iter().any(|v| v.codec.id == "zstd") {
            features.incompat.push(FEATURE_ZSTD.into());
        }
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
        d.validate(ErrorKind::InvalidArgument)?;
        d.check_writable(DEFAULT_MEMORY_LIMIT).map_err(invalid)?;
        Ok(d)
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
        let mut desc = self.descriptor()?;
        let open = |p: &Path| {
            let mut o = FsOpenOptions::new();
            o.read(true).write(true);
            if self.overwrite {
                // Not truncated here: the container is truncated only once its writer lock is held.
                o.create(true);
            } else {
                o.create_new(true);
            }
            open_regular(p, &mut o).map_err(|e| Error::io(format!("creating {}", p.display()), e))
        };
        // Locked on the file the path names once the lock is held: a compaction
        // may rename a new file over it in between.
        let file = locking::open_locked(path, true, || open(path))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        for (i, s) in self.slots.iter().enumerate() {
            let slot_path = dir.join(s);
            if slot_path == path {
                return Err(invalid(format!("external-file slot {s:?} is the container itself")));
            }
            // Truncated after the container's lock is held, as the container is,
            // and given a header with a new id (SPEC.md 8.1).
            desc.slots[i] = slots::create_slot_file(&slot_path, s, self.overwrite, slots::KIND_SLOT)?.1;
        }
        let storage: Arc<dyn Storage> = Arc::new(FileStorage::new(file));
        let compact = self.layout.is_compact_for(&desc);
        let ds = Dataset::initialize(storage, Some(path.to_path_buf()), desc, self.durability, self.overwrite, compact)?;
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
        let desc = self.descriptor()?;
        let compact = self.layout.is_compact_for(&desc);
        Dataset::initialize(storage, None, desc, self.durability, true, compact)
    }
}

/// Counts of a dataset's index entries and stored bytes (see [`Dataset::stats`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Chunks stored as bytes.
    pub stored_chunks: u64,
    /// Chunks whose values are all equal, kept as index entries only.
    pub constant_chunks: u64,
    /// Chunks explicitly written with only fill values, kept as index entries only.
    pub fill_chunks: u64,
    /// Bytes of stored chunks (after compression), across all file slots.
    pub stored_bytes: u64,
    /// Bytes the stored chunks would take uncompressed.
    pub raw_bytes: u64,
    /// Length of the container file at the last commit.
    pub file_bytes: u64,
}

/// Something that names a variable: its index or its name.
pub trait VarRef {
    /// The index of the variable in `ds`.
    ///
    /// # Errors
    /// `NotFound` when there is no such variable.
    fn index_in(&self, ds: &Dataset) -> Result<usize>;
}
impl VarRef for usize {
    fn index_in(&self, ds: &Dataset) -> Result<usize> {
        if *self < ds.vars.len() {
            Ok(*self)
        } else {
            Err(Error::new(ErrorKind::NotFound, format!("no variable with index {self} (the dataset has {})", ds.vars.len())))
        }
    }
}
impl VarRef for &str {
    fn index_in(&self, ds: &Dataset) -> Result<usize> {
        ds.vars.iter().position(|v| v.name == *self).ok_or_else(|| Error::new(ErrorKind::NotFound, format!("no variable named {self:?}")))
    }
}
impl VarRef for &String {
    fn index_in(&self, ds: &Dataset) -> Result<usize> {
        self.as_str().index_in(ds)
    }
}

/// An open container.
///
/// A read-only `Dataset` is `Sync`: threads may read through a shared
/// reference at once. Writing takes `&mut self`. Writes become visible to
/// other handles at [`Dataset::commit`]; dropping a dataset without
/// committing discards its uncommitted writes (the file stays at its last
/// commit), so call [`Dataset::close`] or [`Dataset::commit`] to keep them.
pub struct Dataset {
    path: Option<PathBuf>,
    storage: Arc<dyn Storage>,
    /// External files, opened on first use; index 0 is slot 1.
    slot_files: Mutex<Vec<Option<Arc<dyn Storage>>>>,
    writable: bool,
    durability: Durability,
    desc: DescriptorJson,
    axes: Vec<Axis>,
    vars: Vec<Variable>,
    /// Length of the version line: where the head's descriptor starts.
    line1: u64,
    commit: CommitSlot,
    reader: PageReader,
    // Writer state.
    /// Uncommitted changes of the index: new entries, and `None` for keys
    /// removed (chunks beyond an axis that shrank).
    pending: BTreeMap<Key, Option<Entry>>,
    /// Chunks written in part since the last commit, held decoded until
    /// commit (the write-back buffer), and their bytes.
    held: BTreeMap<Key, writeback::Held>,
    held_bytes: usize,
    /// The most bytes `held` may take (the cache size).
    held_limit: usize,
    /// Regions of level 0 written since the last commit, per variable with
    /// more than one layer: the other layers are updated from them at commit.
    dirty: Vec<(usize, layers::Bounds)>,
    desc_dirty: bool,
    /// Next free byte of the container.
    end: u64,
    /// Next free byte of each external slot (None until first written).
    slot_ends: Vec<Option<u64>>,
    policy: SlotPolicy,
    turn: usize,
    poisoned: bool,
    memory_limit: u64,
    /// Whether external-file slot names may leave the container's directory.
    allow_external_paths: bool,
    cache: Mutex<ChunkCache>,
    /// Stored chunk bytes read from files (not from the cache) since open.
    bytes_read: std::sync::atomic::AtomicU64,
    /// Whether identical stored chunks share their bytes.
    dedup_enabled: bool,
    /// Stored chunks by (XXH64, length, codec byte), built on the first write.
    dedup: Option<HashMap<(u64, u32, u8), Entry>>,
    /// Set when this handle writes a fragment instead of the container.
    fragment: Option<Box<fragments::Fragment>>,
    /// A reader's in-memory copy of the file's first body bytes, if any
    /// (also behind `storage`).
    prefix: Option<Arc<BodyPrefix>>,
    /// Opens external-file slots of a dataset with no path (see
    /// [`OpenOptions::slot_storage`]).
    slot_opener: Option<Arc<SlotOpener>>,
}

/// Stored bytes of a region read announced to the storage at a time
/// ([`Storage::will_read`]).
const READ_AHEAD: u64 = 32 << 20;

/// The default of [`Dataset::set_cache_size`]: 64 MiB.
pub const DEFAULT_CACHE_BYTES: u64 = 64 << 20;

/// The default of [`Dataset::set_memory_limit`]: 1 GiB.
pub const DEFAULT_MEMORY_LIMIT: u64 = 1 << 30;

impl std::fmt::Debug for Dataset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dataset")
            .field("path", &self.path)
            .field("writable", &self.writable)
            .field("commit", &self.commit.sequence)
            .finish_non_exhaustive()
    }
}

impl Dataset {
    /// Opens a container read-only.
    ///
    /// # Errors
    /// See [`OpenOptions::open`].
    pub fn open(path: impl AsRef<Path>) -> Result<Dataset> {
        OpenOptions::new().open(path)
    }

    /// Opens a container for reading and writing.
    ///
    /// # Errors
    /// See [`OpenOptions::open`].
    pub fn open_rw(path: impl AsRef<Path>) -> Result<Dataset> {
        OpenOptions::new().write(true).open(path)
    }

    /// Writes a new container's first commit into `storage` (truncating it
    /// first if `truncate`: a freshly created file is empty already), in the
    /// compact layout if `compact`.
    fn initialize(
        storage: Arc<dyn Storage>,
        path: Option<PathBuf>,
        mut desc: DescriptorJson,
        durability: Durability,
        truncate: bool,
        compact: bool,
    ) -> Result<Dataset> {
        let line1 = version_line();
        layout::mark(&mut desc, compact);
        let json = desc.to_bytes();
        let head = build_head(&line1, &json, compact);
        let head_len = head.len() as u64;
        let slot = CommitSlot {
            minor: FORMAT_MINOR,
            page_size: layout::first_page_size(compact),
            sequence: 1,
            head_len,
            file_len: body_start(head_len),
            desc_offset: line1.len() as u64,
            desc_len: json.len() as u64,
            desc_crc: crc32(&json),
            root: None,
            entries: 0,
        };
        let io = |e| Error::io("writing the new container", e);
        if truncate {
            storage.set_len(0).map_err(io)?;
        }
        // Head and both slots in one write. Commit n lives in slot n % 2
        // (SPEC.md section 4): commit 1 in slot 1, slot 0 empty.
        let mut bytes = head;
        bytes.resize(bytes.len() + slot_size(head_len) as usize, 0);
        bytes.extend_from_slice(&slot.encode());
        storage.write_at(0, &bytes).map_err(io)?;
        if durability == Durability::Fsync {
            storage.sync().map_err(io)?;
        }
        // What was just written is known: no need to read it back.
        let (desc, axes, vars, read_only) = DescriptorJson::parse(&json, DEFAULT_MEMORY_LIMIT)?;
        let snap = Snapshot { line1: line1.len() as u64, commit: slot, desc, axes, vars, read_only };
        Ok(Dataset::from_snapshot(storage, path, true, durability, snap))
    }

    /// Reads the head, the newest intact commit slot and the descriptor.
    fn load(storage: Arc<dyn Storage>, path: Option<PathBuf>, writable: bool, durability: Durability, limit: u64) -> Result<Dataset> {
        let (snap, first) = Snapshot::read_keeping_prefix(&*storage, limit)?;
        if writable && snap.read_only {
            return Err(Error::new(ErrorKind::ReadOnly, "the file uses a feature that this library can read but not write"));
        }
        // A reader keeps the body bytes the head search read (up to 64 KiB):
        // a small file is then served without another read.
        let prefix = if writable { None } else { BodyPrefix::new(storage.clone(), first, &snap.commit) };
        let storage = prefix.clone().map_or(storage, |p| p as Arc<dyn Storage>);
        let mut ds = Dataset::from_snapshot(storage, path, writable, durability, snap);
        ds.prefix = prefix;
        Ok(ds)
    }

    fn from_snapshot(storage: Arc<dyn Storage>, path: Option<PathBuf>, writable: bool, durability: Durability, snap: Snapshot) -> Dataset {
        let nslots = snap.desc.slots.len();
        Dataset {
            path,
            storage,
            slot_files: Mutex::new(vec![None; nslots]),
            writable,
            durability,
            desc: snap.desc,
            axes: snap.axes,
            vars: snap.vars,
            line1: snap.line1,
            reader: PageReader::new(snap.commit.page_size, snap.commit.file_len),
            end: snap.commit.file_len,
            commit: snap.commit,
            pending: BTreeMap::new(),
            held: BTreeMap::new(),
            held_bytes: 0,
            held_limit: DEFAULT_CACHE_BYTES as usize,
            dirty: Vec::new(),
            desc_dirty: false,
            slot_ends: vec![None; nslots],
            policy: SlotPolicy::Fixed(0),
            turn: 0,
            poisoned: false,
            memory_limit: DEFAULT_MEMORY_LIMIT,
            allow_external_paths: false,
            cache: Mutex::new(ChunkCache::new(DEFAULT_CACHE_BYTES as usize)),
            bytes_read: std::sync::atomic::AtomicU64::new(0),
            dedup_enabled: true,
            dedup: None,
            fragment: None,
            prefix: None,
            slot_opener: None,
        }
    }

    /// Moves a read-only dataset to the file's newest commit, if another
    /// handle committed since this one opened or last refreshed; until then
    /// it keeps reading its snapshot. Returns whether it moved. A writable
    /// dataset always sees its own commits and returns `false`.
    ///
    /// # Errors
    /// As [`Dataset::open`]; on error the dataset keeps its snapshot.
    pub fn refresh(&mut self) -> Result<bool> {
        if self.writable {
            return Ok(false);
        }
        let snap = Snapshot::read(&*self.storage, self.memory_limit)?;
        if snap.commit == self.commit {
            return Ok(false);
        }
        if snap.desc.slots.len() != self.desc.slots.len() {
            *self.slot_files.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = vec![None; snap.desc.slots.len()];
            self.slot_ends = vec![None; snap.desc.slots.len()];
        }
        self.desc = snap.desc;
        self.axes = snap.axes;
        self.vars = snap.vars;
        // Pages are immutable once committed, and cached by (offset, CRC, level): the cache stays
        // valid, unless the writer moved a compact container to larger pages.
        if snap.commit.page_size != self.reader.page_size {
            self.reader = PageReader::new(snap.commit.page_size, snap.commit.file_len);
        }
        self.reader.limit = snap.commit.file_len;
        self.end = snap.commit.file_len;
        self.commit = snap.commit;
        Ok(true)
    }

    /// The format version of the file's descriptor (`[major, minor]`): the
    /// version that created it, kept when later versions modify it.
    pub fn format_version(&self) -> [u16; 2] {
        self.desc.version
    }

    /// The dataset's axes.
    pub fn axes(&self) -> &[Axis] {
        &self.axes
    }

    /// The dataset's variables.
    pub fn variables(&self) -> &[Variable] {
        &self.vars
    }

    /// One variable, by index or name.
    ///
    /// # Errors
    /// `NotFound`.
    pub fn variable(&self, var: impl VarRef) -> Result<&Variable> {
        Ok(&self.vars[var.index_in(self)?])
    }

    /// Names of the external-file slots; slot `i + 1` is `external_slots()[i]`.
    pub fn external_slots(&self) -> Vec<&str> {
        self.desc.slots.iter().map(|s| s.name.as_str()).collect()
    }

    /// The dataset's attributes.
    pub fn attributes(&self) -> &Map<String, Value> {
        &self.desc.attributes
    }

    /// A variable's attributes.
    ///
    /// # Errors
    /// `NotFound`.
    pub fn variable_attributes(&self, var: impl VarRef) -> Result<&Map<String, Value>> {
        Ok(&self.desc.variables[var.index_in(self)?].attributes)
    }

    /// Sets (or with `None` removes) a dataset attribute; committed with the next commit.
    ///
    /// # Errors
    /// `ReadOnly`, `InvalidArgument` for a bad key or a descriptor grown beyond its limit.
    pub fn set_attribute(&mut self, key: &str, value: Option<Value>) -> Result<()> {
        self.check_writable()?;
        self.check_not_fragment()?;
        check_name("attribute", key).map_err(invalid)?;
        let old = match value {
            Some(v) => self.desc.attributes.insert(key.into(), v),
            None => self.desc.attributes.shift_remove(key),
        };
        self.descriptor_changed(|d| match old {
            Some(v) => d.attributes.insert(key.into(), v),
            None => d.attributes.shift_remove(key),
        })
    }

    /// Sets (or with `None` removes) a variable attribute; committed with the next commit.
    ///
    /// # Errors
    /// As [`Dataset::set_attribute`], and `NotFound`.
    pub fn set_variable_attribute(&mut self, var: impl VarRef, key: &str, value: Option<Value>) -> Result<()> {
        self.check_writable()?;
        self.check_not_fragment()?;
        let v = var.index_in(self)?;
        check_name("attribute", key).map_err(invalid)?;
        let attrs = &mut self.desc.variables[v].attributes;
        let old = match value {
            Some(val) => attrs.insert(key.into(), val),
            None => attrs.shift_remove(key),
        };
        self.descriptor_changed(|d| match old {
            Some(val) => d.variables[v].attributes.insert(key.into(), val),
            None => d.variables[v].attributes.shift_remove(key),
        })
    }

    /// Marks the descriptor changed, or undoes the change with `undo` if the descriptor grew too large.
    fn descriptor_changed(&mut self, undo: impl FnOnce(&mut DescriptorJson) -> Option<Value>) -> Result<()> {
        if let Err(why) = self.desc.check_writable(self.memory_limit) {
            undo(&mut self.desc);
            return Err(invalid(why));
        }
        self.desc_dirty = true;
        Ok(())
    }

    /// The descriptor as of the last commit plus uncommitted attribute changes, as JSON text.
    pub fn descriptor_json(&self) -> String {
        String::from_utf8(self.desc.to_bytes()).unwrap_or_default()
    }

    /// Chooses where new stored chunks go.
    ///
    /// # Errors
    /// `InvalidArgument` when the policy names a slot the dataset does not have.
    pub fn set_slot_policy(&mut self, policy: SlotPolicy) -> Result<()> {
        self.check_not_fragment()?;
        let slots: &[u16] = match &policy {
            SlotPolicy::Fixed(s) => std::slice::from_ref(s),
            SlotPolicy::RoundRobin(s) | SlotPolicy::BySize { slots: s, .. } | SlotPolicy::ByVariable(s) => s,
        };
        let n = self.desc.slots.len();
        if slots.is_empty() || slots.iter().any(|&s| usize::from(s) > n) {
            return Err(invalid(format!("slot policy {policy:?} must name slots 0..={n}")));
        }
        if slots.iter().any(|&s| s > 0) && self.path.is_none() {
            return Err(invalid("external-file slots need a container on disk"));
        }
        self.policy = policy;
        self.turn = 0;
        Ok(())
    }

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
        let n = region.check_within(&self.vars[v].shape, &format!("variable {:?}", self.vars[v].name))?;
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

    /// Writes a region of a variable from `data`, laid out in `order`.
    ///
    /// Chunks the region covers completely are replaced; partly covered
    /// chunks are read, updated and rewritten. Chunks whose values all equal
    /// one value are kept as index entries only. The writes become durable
    /// and visible to other handles at the next [`Dataset::commit`].
    ///
    /// # Errors
    /// As [`Dataset::read`], and `ReadOnly`, `Poisoned`, `Io`.
    pub fn write<T: Element>(&mut self, var: impl VarRef, region: &Region, order: Order, data: &[T]) -> Result<()> {
        let v = var.index_in(self)?;
        self.check_type(v, T::DTYPE)?;
        self.write_as(v, region, order, as_bytes(data), T::DTYPE)
    }

    /// Checks a buffer's element type: the variable's, or for a quantized
    /// variable also its storage type (the stored integers).
    pub(crate) fn check_type(&self, v: usize, t: DType) -> Result<()> {
        let var = &self.vars[v];
        if var.dtype != t && var.quant.is_none_or(|q| q.storage != t) {
            return Err(Error::new(ErrorKind::TypeMismatch, format!("variable {:?} holds {}, the buffer holds {t}", var.name, var.dtype)));
        }
        Ok(())
    }

    fn check_writable(&self) -> Result<()> {
        if !self.writable {
            return Err(Error::new(ErrorKind::ReadOnly, "the dataset is open read-only"));
        }
        if self.poisoned {
            return Err(Error::new(ErrorKind::Poisoned, "an earlier write failed; reopen the dataset to continue from its last commit"));
        }
        Ok(())
    }

    /// Checks a region and buffer length; returns the region's element count.
    fn check_request(&self, var: &Variable, region: &Region, bytes: usize) -> Result<usize> {
        self.check_request_as(var, var.esize(), region, bytes)
    }

    /// As `check_request`, for elements of `esize` bytes.
    fn check_request_as(&self, var: &Variable, esize: usize, region: &Region, bytes: usize) -> Result<usize> {
        let n = region.check_within(&var.shape, &format!("variable {:?}", var.name))?;
        let need = wire::mul(n, esize as u64, "region byte size")?;
        if (bytes as u64) < need {
            return Err(Error::new(
                ErrorKind::BufferTooSmall,
                format!("the region needs a buffer of {need} bytes, the buffer has {bytes}"),
            ));
        }
        if bytes as u64 != need {
            return Err(invalid(format!("the region needs a buffer of {need} bytes, the buffer has {bytes}")));
        }
        wire::to_usize(n, "region element count")
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
    fn read_layer(&self, var: &Variable, region: &Region, order: Order, out: &mut [u8]) -> Result<()> {
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
        for_each_chunk(var, region, order, false, |coords, plan| {
            let key = chunk_key(var, coords);
            if let Some(data) = self.held(&key) {
                copy_block(&plan.spans, esize, data, plan.src0, out, plan.dst0);
                return Ok(());
            }
            match self.entry(&key)? {
                None | Some(Entry::Fill) => fill_block(&plan.dst_spans(), &var.fill[..esize], out, plan.dst0),
                Some(Entry::Constant { value }) => {
                    fill_block(&plan.dst_spans(), &constant_native(var, &value, coords)?[..esize], out, plan.dst0);
                }
                Some(e) if self.read_direct(var, coords, plan, e, out)? => {}
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
        // its storage first (Storage::will_read), so that a store over a
        // network fetches a window's chunks at once.
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
            let window = &stored[from..to];
            self.announce_reads(var, window);
            if workers < 2 {
                for (coords, plan, e) in window {
                    let data = self.chunk_data(var, coords, *e)?;
                    copy_block(&plan.spans, esize, &data, plan.src0, out, plan.dst0);
                }
            } else {
                self.decode_parallel(var, window, workers.min(window.len()), |plan, data| {
                    copy_block(&plan.spans, esize, data, plan.src0, out, plan.dst0)
                })?;
            }
            from = to;
        }
        Ok(())
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
        let same_form = var.dtype != DType::Bool && (cfg!(target_endian = "little") || var.esize() == 1);
        if !same_form
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
        let computed = crc32(dst);
        let mismatch = if computed != crc {
            Some(format!("CRC32 mismatch (stored {crc:#010x}, computed {computed:#010x})"))
        } else if hash != 0 && self.records_hashes() && xxh64(dst) != hash {
            Some(format!("XXH64 mismatch (stored {hash:#018x}, computed {:#018x})", xxh64(dst)))
        } else {
            None
        };
        if let Some(detail) = mismatch {
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

    /// [`Dataset::write`] on raw bytes: `data` holds the region's elements in
    /// native byte order (one byte per bool, any non-zero byte is true).
    ///
    /// # Errors
    /// As [`Dataset::write`], without `TypeMismatch`.
    pub fn write_bytes(&mut self, var: impl VarRef, region: &Region, order: Order, data: &[u8]) -> Result<()> {
        let v = var.index_in(self)?;
        self.write_as(v, region, order, data, self.vars[v].dtype)
    }

    /// Writes level 0 of variable `v` from `data`, holding elements of
    /// `as_type`: the variable's type (quantized if the variable is), or a
    /// quantized variable's storage type.
    pub(crate) fn write_as(&mut self, v: usize, region: &Region, order: Order, data: &[u8], as_type: DType) -> Result<()> {
        self.write_masked_as(v, region, order, data, as_type, None)
    }

    /// Writes a region and, for a variable with a missing-value mask, its
    /// mask: `missing` (one byte per element, non-zero = missing, in the
    /// same order), or all present when `None`.
    pub(crate) fn write_masked_as(
        &mut self,
        v: usize,
        region: &Region,
        order: Order,
        data: &[u8],
        as_type: DType,
        missing: Option<&[u8]>,
    ) -> Result<()> {
        self.check_writable()?;
        if self.fragment.is_some() && self.vars[v].margin != [0, 0] {
            // Margins copy neighbours' samples: writers of adjacent regions would collide.
            return Err(invalid(format!(
                "variable {:?} has margins: write it in the container, not through a fragment",
                self.vars[v].name
            )));
        }
        if let Some(m) = missing {
            let Some(mask) = self.vars[v].masks.first() else {
                return Err(invalid(format!("variable {:?} keeps no missing-value mask", self.vars[v].name)));
            };
            // Checked before anything is written.
            self.check_request_as(mask, 1, region, m.len())?;
        }
        // Noted first, so that even a write that fails halfway is carried
        // into the other layers by the next commit.
        self.mark_dirty(v, region);
        let layer = self.vars[v].layers[0].clone();
        let (dtype, quant) = (self.vars[v].dtype, self.vars[v].quant);
        match quant {
            Some(q) if as_type != q.storage => {
                let n = self.check_request_as(&layer, dtype.size(), region, data.len())?;
                let mut ints = Vec::new();
                self.reserve(&mut ints, n * layer.esize(), "the quantized integers of a region")?;
                quant::to_integers(&q, dtype, data, &mut ints);
                self.write_layer(&layer, region, order, &ints)?;
            }
            _ => self.write_layer(&layer, region, order, data)?,
        }
        // The mask after the values, whose write checks the region and buffer first.
        if let Some(mask) = self.vars[v].masks.first().cloned() {
            let n = wire::to_usize(region.check_within(&mask.shape, &format!("variable {:?}", mask.name))?, "region element count")?;
            let mut present = Vec::new();
            let bits: &[u8] = match missing {
                Some(m) => m,
                None => {
                    self.reserve(&mut present, n, "a missing-value mask")?;
                    &present
                }
            };
            self.write_layer(&mask, region, order, bits)?;
        }
        Ok(())
    }

    /// Writes a region of one stored layer.
    fn write_layer(&mut self, var: &Variable, region: &Region, order: Order, data: &[u8]) -> Result<()> {
        if self.check_request(var, region, data.len())? == 0 {
            return Ok(());
        }
        let esize = var.esize();
        let what = format!("a chunk of variable {:?}", var.name);
        let mut buf = Vec::new();
        self.reserve(&mut buf, var.chunk_elems * esize, &what)?;
        // Chunks the region covers entirely need no old contents: they are
        // gathered and encoded on several cores. The others are read,
        // updated and rewritten here, one by one.
        let mut full: Vec<(Vec<u64>, ChunkPlan)> = Vec::new();
        // Partly covered chunks are held (SPEC.md 7.1): a later write to the
        // same chunk updates it in memory, and the commit stores it once.
        let result = for_each_chunk(var, region, order, true, |coords, plan| {
            let key = chunk_key(var, coords);
            if plan.covers_chunk {
                self.unhold(&key);
                full.push((coords.to_vec(), plan.clone()));
                return Ok(());
            }
            if let Some(h) = self.held.get_mut(&key) {
                gather(var, plan, data, &mut h.data);
                return Ok(());
            }
            self.load_chunk(var, coords, &mut buf)?;
            gather(var, plan, data, &mut buf);
            let mut next = Vec::new();
            if buf.len() <= self.held_limit {
                // The next chunk needs a buffer of its own.
                self.reserve(&mut next, var.chunk_elems * esize, &what)?;
            }
            match self.hold(key, var, coords, std::mem::replace(&mut buf, next))? {
                None => {}
                Some(unheld) => {
                    buf = unheld;
                    let entry = self.store_prepared(var, prepare(var, coords, &buf))?;
                    self.pending.insert(key, Some(entry));
                }
            }
            Ok(())
        })
        .and_then(|()| {
            let workers = if full.len() * var.chunk_elems * esize < PARALLEL_MIN_BYTES { 1 } else { cores().min(full.len()) };
            if workers < 2 {
                for (coords, plan) in &full {
                    fill_chunk(var, &var.fill, &mut buf);
                    gather(var, plan, data, &mut buf);
                    let entry = self.store_prepared(var, prepare(var, coords, &buf))?;
                    self.pending.insert(chunk_key(var, coords), Some(entry));
                }
                return Ok(());
            }
            // Each worker holds one chunk buffer.
            if (workers * var.chunk_elems * esize) as u64 > self.memory_limit {
                return Err(Error::new(ErrorKind::OutOfMemory, format!("{workers} buffers for {what} exceed the memory limit")));
            }
            self.encode_parallel(var, &full, data, workers)
        });
        if let Err(e) = &result {
            if e.kind() == ErrorKind::Io {
                self.poisoned = true;
            }
        }
        result
    }

    /// Sizes `buf` to `n` zero bytes, within the memory limit and without
    /// aborting when memory is short.
    fn reserve(&self, buf: &mut Vec<u8>, n: usize, what: &str) -> Result<()> {
        if n as u64 > self.memory_limit {
            return Err(Error::new(
                ErrorKind::OutOfMemory,
                format!("{what} needs {n} bytes, more than the memory limit of {} bytes", self.memory_limit),
            ));
        }
        buf.clear();
        buf.try_reserve_exact(n).map_err(|_| Error::new(ErrorKind::OutOfMemory, format!("cannot allocate {n} bytes for {what}")))?;
        buf.resize(n, 0);
        Ok(())
    }

    /// The most bytes one buffer (a chunk, or a region from
    /// [`Dataset::read_vec`]) may take; larger requests fail with
    /// `OutOfMemory` instead of allocating. The default is 1 GiB.
    pub fn set_memory_limit(&mut self, bytes: u64) {
        self.memory_limit = bytes;
    }

    /// The most bytes of decoded chunks kept for later reads (64 MiB by
    /// default; 0 turns the cache off). Repeated reads of small regions of
    /// compressed chunks then decode each chunk once. Besides, up to four
    /// buffers of evicted chunks, within a quarter of this size, are kept for
    /// the next chunks read.
    ///
    /// The same bound applies, separately, to the write-back buffer: chunks
    /// written in part are held decoded until the commit, so that repeated
    /// small writes to one chunk read and store it once. When the held
    /// chunks would exceed the bound they are stored at once (and may be
    /// stored again if written again before the commit); 0 stores every
    /// partial write immediately.
    pub fn set_cache_size(&mut self, bytes: u64) {
        let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        self.cache_lock().resize(bytes);
        self.held_limit = bytes;
    }

    fn cache_lock(&self) -> std::sync::MutexGuard<'_, ChunkCache> {
        self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
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
    fn entry(&self, key: &Key) -> Result<Option<Entry>> {
        if let Some(e) = self.pending.get(key) {
            return Ok(*e);
        }
        self.reader.lookup(&*self.storage, self.commit.root, key)
    }

    /// The whole current contents of a chunk, in memory form.
    fn load_chunk(&self, var: &Variable, coords: &[u64], buf: &mut Vec<u8>) -> Result<()> {
        let key = chunk_key(var, coords);
        if let Some(data) = self.held(&key) {
            buf.clear();
            buf.extend_from_slice(data);
            return Ok(());
        }
        self.load_entry(var, coords, self.entry(&key)?, buf)
    }

    /// The whole contents of a chunk whose entry is `entry`, in memory form.
    fn load_entry(&self, var: &Variable, coords: &[u64], entry: Option<Entry>, buf: &mut Vec<u8>) -> Result<()> {
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
        // Stored bytes are never longer than the raw form (SPEC.md section 6).
        if length == 0 || length as usize > raw {
            return Err(bad(format!("stored length {length} outside 1..={raw}")));
        }
        // Codec byte 2 is a format 1.3 feature: a file must announce it (SPEC.md 6.3).
        if codec & 0x0f == codec::CODEC_ZSTD && !self.desc.features.incompat.iter().any(|f| f == FEATURE_ZSTD) {
            return Err(bad(format!("codec byte {codec:#04x} (zstd) in a file that does not list the feature \"zstd\"")));
        }
        // No codec expands beyond a fixed ratio: a short entry cannot claim a huge chunk.
        if (raw as u64) > u64::from(length) * codec::max_expansion(codec) + 1024 {
            return Err(bad(format!("{length} stored bytes cannot hold a chunk of {raw} bytes")));
        }
        let storage = self.slot_storage(slot).map_err(|e| {
            if e.kind() == ErrorKind::NotFound && slot as usize > self.desc.slots.len() {
                bad(format!("file slot {slot} does not exist"))
            } else {
                e
            }
        })?;
        self.check_stored_range(&*storage, slot, offset, length)?.map_err(bad)?;
        self.reserve(buf, var.chunk_elems * var.esize(), &object())?;
        // An uncompressed chunk whose stored form is its memory form is read
        // straight into the chunk buffer; anything else goes through `stored`.
        let in_place =
            codec == codec::CODEC_NONE && var.dtype != DType::Bool && cfg!(target_endian = "little") && length as usize == buf.len();
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
        let computed = crc32(target);
        if computed != crc {
            return Err(bad(format!("CRC32 mismatch (stored {crc:#010x}, computed {computed:#010x})")));
        }
        if hash != 0 && self.records_hashes() && xxh64(target) != hash {
            return Err(bad(format!("XXH64 mismatch (stored {hash:#018x}, computed {:#018x})", xxh64(target))));
        }
        if in_place {
            return Ok(());
        }
        codec::decode(var.dtype, codec, &stored, buf).map_err(bad)
    }

    fn count_read(&self, length: u32) {
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
    fn check_stored_range(&self, storage: &dyn Storage, slot: u16, offset: u64, length: u32) -> Result<std::result::Result<(), String>> {
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

    /// The storage of file slot `slot` (0 = the container).
    fn slot_storage(&self, slot: u16) -> Result<Arc<dyn Storage>> {
        if slot == 0 {
            return Ok(self.storage.clone());
        }
        let i = usize::from(slot) - 1;
        let mut files = self.slot_files.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = files.get_mut(i).ok_or_else(|| Error::new(ErrorKind::NotFound, format!("external file slot {slot} does not exist")))?;
        if let Some(s) = entry {
            return Ok(s.clone());
        }
        let name = &self.desc.slots[i].name;
        if let (None, Some(open)) = (&self.path, &self.slot_opener) {
            if !self.allow_external_paths {
                check_slot_name(name).map_err(|e| {
                    Error::corrupt(format!("external file slot {slot}"), 0, 0, format!("{e}; open with allow_external_paths to follow it"))
                })?;
            }
            let what = format!("external file slot {slot} ({name})");
            let s = open(name).map_err(|e| Error::io(format!("opening {what}"), e))?;
            self.check_slot_identity(i, &*s, &what)?;
            *entry = Some(s.clone());
            return Ok(s);
        }
        let dir = self.path.as_deref().and_then(Path::parent).ok_or_else(|| invalid("external-file slots need a container on disk"))?;
        let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
        let p = dir.join(name);
        if !self.allow_external_paths {
            // The name comes from the file: it must stay inside the container's
            // directory, lexically and after resolving symbolic links.
            let refuse = |why: String| Error::corrupt(format!("external file slot {slot}"), 0, 0, why);
            check_slot_name(name).map_err(|e| refuse(format!("{e}; open with allow_external_paths to follow it")))?;
            let real_dir = dir.canonicalize().map_err(|e| Error::io(format!("resolving {}", dir.display()), e))?;
            let real = p.canonicalize().map_err(|e| Error::io(format!("opening external file slot {slot} ({})", p.display()), e))?;
            if !real.starts_with(&real_dir) {
                return Err(refuse(format!(
                    "slot name {name:?} resolves to {}, outside the container's directory; open with allow_external_paths to follow it",
                    real.display()
                )));
            }
        }
        let file = open_regular(&p, FsOpenOptions::new().read(true).write(self.writable))
            .map_err(|e| Error::io(format!("opening external file slot {slot} ({})", p.display()), e))?;
        let s: Arc<dyn Storage> = Arc::new(FileStorage::new(file));
        self.check_slot_identity(i, &*s, &format!("external file slot {slot} ({})", p.display()))?;
        *entry = Some(s.clone());
        Ok(s)
    }

    /// Gathers and encodes fully covered chunks on `workers` threads while
    /// this thread appends them to the file. At most two encoded chunks per
    /// worker wait to be written.
    fn encode_parallel(&mut self, var: &Variable, full: &[(Vec<u64>, ChunkPlan)], data: &[u8], workers: usize) -> Result<()> {
        pipeline(
            full.len(),
            workers,
            || vec![0u8; var.chunk_elems * var.esize()],
            |buf, i| {
                let (coords, plan) = &full[i];
                // The region covers the chunk's valid part, so only a chunk
                // that reaches beyond the variable's extent needs its fill.
                let (valid, _) = valid_part(var, coords);
                if valid.iter().map(|s| s.count).product::<usize>() != var.chunk_elems {
                    fill_chunk(var, &var.fill, buf);
                }
                gather(var, plan, data, buf);
                Ok(prepare(var, coords, buf))
            },
            |i, prepared| {
                let entry = self.store_prepared(var, prepared)?;
                self.pending.insert(chunk_key(var, &full[i].0), Some(entry));
                Ok(())
            },
        )
    }

    /// Writes a prepared chunk's bytes (if any) and returns its index entry.
    /// A chunk whose stored bytes equal those of a chunk already in the file
    /// (same XXH64, length, codec and CRC32, then compared byte for byte)
    /// shares them instead.
    fn store_prepared(&mut self, var: &Variable, prepared: Prepared) -> Result<Entry> {
        let (codec_byte, bytes, crc, hash) = match prepared {
            Prepared::Entry(e) => return Ok(e),
            Prepared::Bytes { codec, bytes, crc, hash } => (codec, bytes, crc, hash),
        };
        let length = bytes.len() as u32;
        if let Some(e) = self.find_duplicate(codec_byte, &bytes, crc, hash)? {
            return Ok(e);
        }
        let slot = self.next_slot(var.index);
        let storage = self.slot_storage(slot)?;
        let offset = if slot == 0 {
            self.end
        } else {
            let i = usize::from(slot) - 1;
            match self.slot_ends[i] {
                Some(e) => e,
                None => storage.len().map_err(|e| Error::io(format!("reading the length of external file slot {slot}"), e))?,
            }
        };
        let end = wire::add(offset, u64::from(length), "file length")?;
        storage.write_at(offset, &bytes).map_err(|e| Error::io(format!("writing a chunk of variable {:?}", var.name), e))?;
        if slot == 0 {
            self.end = end;
        } else {
            self.slot_ends[usize::from(slot) - 1] = Some(end);
        }
        // Files that do not announce chunk hashes keep the field 0 (SPEC.md 5.5).
        let entry = Entry::Stored { codec: codec_byte, slot, offset, length, crc, hash: if self.records_hashes() { hash } else { 0 } };
        if let Some(map) = &mut self.dedup {
            map.entry((hash, length, codec_byte)).or_insert(entry);
        }
        Ok(entry)
    }

    /// A stored chunk of this file with exactly these bytes, if deduplication
    /// is on and there is one. The first call indexes the committed chunks.
    fn find_duplicate(&mut self, codec_byte: u8, bytes: &[u8], crc: u32, hash: u64) -> Result<Option<Entry>> {
        if !self.dedup_enabled || hash == 0 {
            return Ok(None);
        }
        if self.dedup.is_none() {
            let mut map = HashMap::new();
            self.reader.for_each(&*self.storage, self.commit.root, &mut |_, e| {
                if let Entry::Stored { codec, length, hash, .. } = *e {
                    if hash != 0 {
                        map.entry((hash, length, codec)).or_insert(*e);
                    }
                }
                Ok(())
            })?;
            for e in self.pending.values().flatten() {
                if let Entry::Stored { codec, length, hash, .. } = *e {
                    if hash != 0 {
                        map.entry((hash, length, codec)).or_insert(*e);
                    }
                }
            }
            self.dedup = Some(map);
        }
        let Some(&candidate) = self.dedup.as_ref().and_then(|m| m.get(&(hash, bytes.len() as u32, codec_byte))) else { return Ok(None) };
        let Entry::Stored { slot, offset, length, crc: c, .. } = candidate else { return Ok(None) };
        if c != crc {
            return Ok(None);
        }
        // Trusted only after a byte-for-byte comparison with what is in the file.
        let storage = self.slot_storage(slot)?;
        if self.check_stored_range(&*storage, slot, offset, length)?.is_err() {
            return Ok(None);
        }
        let mut existing = Vec::new();
        self.reserve(&mut existing, length as usize, "a chunk compared for deduplication")?;
        storage.read_at(offset, &mut existing).map_err(|e| Error::io("reading a chunk compared for deduplication", e))?;
        Ok((existing == bytes).then_some(candidate))
    }

    /// Whether the file announces the `chunk_hashes` feature: its stored
    /// entries record the XXH64 of their bytes.
    fn records_hashes(&self) -> bool {
        self.desc.features.compat.iter().any(|f| f == FEATURE_CHUNK_HASHES)
    }

    /// Whether chunks with identical stored bytes share them (on by default).
    /// Each candidate is compared byte for byte before it is shared. The
    /// first write of a handle with deduplication on walks the index once.
    pub fn set_deduplication(&mut self, on: bool) {
        self.dedup_enabled = on;
        if !on {
            self.dedup = None;
        }
    }

    /// The slot the next stored chunk goes to, by the slot policy.
    fn next_slot(&mut self, var: usize) -> u16 {
        match &self.policy {
            SlotPolicy::ByVariable(list) => list.get(var).copied().unwrap_or(0),
            SlotPolicy::Fixed(s) => *s,
            SlotPolicy::RoundRobin(list) => {
                let s = list[self.turn % list.len()];
                self.turn = self.turn.wrapping_add(1);
                s
            }
            SlotPolicy::BySize { slots, max_bytes } => {
                let used = |s: u16| if s == 0 { self.end } else { self.slot_ends[usize::from(s) - 1].unwrap_or(0) };
                while self.turn + 1 < slots.len() && used(slots[self.turn]) >= *max_bytes {
                    self.turn += 1;
                }
                slots[self.turn.min(slots.len() - 1)]
            }
        }
    }

    /// Makes every write and attribute change since the last commit durable
    /// and visible, atomically (SPEC.md section 7). Does nothing when there
    /// is nothing to commit.
    ///
    /// # Errors
    /// `ReadOnly`, `Poisoned`, `Io`. After an error the dataset refuses
    /// further writes (`Poisoned`); the file stays at its last commit.
    pub fn commit(&mut self) -> Result<()> {
        self.check_writable()?;
        if self.fragment.is_some() {
            self.flush_held()?;
            // A fragment's layers are computed by the merge, from the regions its seal lists.
            let result = self.seal_fragment();
            if result.is_err() {
                self.poisoned = true;
            }
            return result;
        }
        // Stores the held chunks first: the other layers are computed from them.
        self.update_layers()?;
        if !self.has_uncommitted() {
            return Ok(());
        }
        // Sequence numbers never wrap (SPEC.md 4): a wrapped number would
        // lose to the older slot on the next open, and with it this commit.
        let Some(sequence) = self.commit.sequence.checked_add(1) else {
            return Err(Error::new(
                ErrorKind::OutOfRange,
                format!(
                    "commit {} is the last sequence number a container can hold: nothing was written; \
                     roll back, compact the container (which numbers its commits from 1 again) and write again",
                    self.commit.sequence
                ),
            ));
        };
        let result = self.commit_inner(sequence);
        if result.is_err() {
            self.poisoned = true;
        }
        result
    }

    fn commit_inner(&mut self, sequence: u64) -> Result<()> {
        // Chunks held since the layers were updated (the layers' own partial writes).
        self.flush_held()?;
        let fsync = self.durability == Durability::Fsync;
        // 1. Chunks in external files reach the disk before anything refers to them.
        if fsync {
            let files = self.slot_files.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
            for (i, f) in files.iter().enumerate() {
                if let (Some(f), Some(_)) = (f, self.slot_ends[i]) {
                    f.sync().map_err(|e| Error::io(format!("syncing external file slot {}", i + 1), e))?;
                }
            }
        }
        // 2. New index pages, copy-on-write, after the chunks in the container.
        // (A compact container that has grown gets 4 KiB pages here, SPEC.md 1.1.)
        let changes: Vec<index::Change> = self.pending.iter().map(|(k, e)| (*k, *e)).collect();
        let (page_size, w, root, entries) = self.index_pages(&changes)?;
        let io = |what: &'static str| move |e| Error::io(format!("committing: writing {what}"), e);
        self.storage.write_at(self.end, &w.buf).map_err(io("index pages"))?;
        self.end += w.buf.len() as u64;
        // Slots with an identity record their length at this commit (SPEC.md 8.1).
        for (s, end) in self.desc.slots.iter_mut().zip(&self.slot_ends) {
            if let (Some(_), Some(end)) = (&s.id, end) {
                if s.length != Some(*end) {
                    s.length = Some(*end);
                    self.desc_dirty = true;
                }
            }
        }
        // 3. A changed descriptor goes to the body; the slot points at it.
        let (mut desc_offset, mut desc_len, mut desc_crc) = (self.commit.desc_offset, self.commit.desc_len, self.commit.desc_crc);
        let json = self.desc.to_bytes();
        if self.desc_dirty {
            self.storage.write_at(self.end, &json).map_err(io("the descriptor"))?;
            (desc_offset, desc_len, desc_crc) = (self.end, json.len() as u64, crc32(&json));
            self.end += json.len() as u64;
        }
        // 4. Everything the new slot refers to is durable before the slot is written.
        let next = CommitSlot {
            minor: FORMAT_MINOR,
            page_size,
            sequence,
            head_len: self.commit.head_len,
            file_len: self.end,
            desc_offset,
            desc_len,
            desc_crc,
            root,
            entries,
        };
        self.publish(&next)?;
        self.pending.clear();
        // The commit is durable now. What follows is cosmetic and cannot fail it.
        if std::mem::take(&mut self.desc_dirty) {
            self.mirror_descriptor(&json, next);
        }
        Ok(())
    }

    /// Copies the committed descriptor into the head so that `head -n 2`
    /// shows it, when it fits, and publishes a commit that points at it.
    /// The commit just published (pointing into the body) stays intact while
    /// the head is rewritten, so a crash or an error here loses nothing: the
    /// file stays at that commit, whose descriptor is in the body.
    fn mirror_descriptor(&mut self, json: &[u8], mut next: CommitSlot) {
        let capacity = self.commit.head_len - 1 - self.line1;
        // At the last sequence number the commit stays as published, its descriptor in the body.
        let Some(sequence) = next.sequence.checked_add(1) else { return };
        if json.len() as u64 > capacity {
            return;
        }
        let mut line = vec![b' '; capacity as usize];
        line[..json.len()].copy_from_slice(json);
        if self.storage.write_at(self.line1, &line).is_ok() {
            next.sequence = sequence;
            next.desc_offset = self.line1;
            // On failure the handle keeps the previous commit, which is as good.
            let _ = self.publish(&next);
        }
    }

    /// Syncs, writes `slot` to its commit slot, syncs again, and adopts it.
    fn publish(&mut self, slot: &CommitSlot) -> Result<()> {
        let fsync = self.durability == Durability::Fsync;
        if fsync {
            self.storage.sync().map_err(|e| Error::io("committing: syncing the file", e))?;
        }
        let at = slot_offset(slot.head_len, slot.sequence);
        self.storage.write_at(at, &slot.encode()).map_err(|e| Error::io("committing: writing the commit slot", e))?;
        if fsync {
            self.storage.sync().map_err(|e| Error::io("committing: syncing the commit slot", e))?;
        }
        if slot.page_size != self.reader.page_size {
            self.reader = PageReader::new(slot.page_size, slot.file_len);
        }
        self.commit = slot.clone();
        self.reader.limit = slot.file_len;
        Ok(())
    }

    /// Discards every write and attribute change since the last commit: the
    /// dataset returns to what the file holds. Space the discarded chunks
    /// took in the container is reused by later writes.
    ///
    /// # Errors
    /// `Corrupt` or `Io` when the committed descriptor must be read again
    /// and cannot be. A read-only dataset has nothing to discard.
    pub fn rollback(&mut self) -> Result<()> {
        if !self.writable {
            return Ok(());
        }
        self.pending.clear();
        self.discard_held();
        self.dirty.clear();
        // Discarded chunks' space is reused: forget them as duplicates too.
        self.dedup = None;
        // Later chunks may be written where the discarded ones were: forget those.
        self.cache_lock().clear();
        self.end = self.commit.file_len;
        if std::mem::take(&mut self.desc_dirty) {
            let snap = Snapshot::for_slot_within(&*self.storage, self.commit.clone(), self.line1, self.memory_limit)?;
            self.desc = snap.desc;
            self.axes = snap.axes;
            self.vars = snap.vars;
            // Slots added since the commit are forgotten (their files stay).
            let n = self.desc.slots.len();
            self.slot_files.lock().unwrap_or_else(std::sync::PoisonError::into_inner).truncate(n);
            self.slot_ends.truncate(n);
        }
        Ok(())
    }

    /// Commits (if writable) and closes the dataset.
    ///
    /// # Errors
    /// As [`Dataset::commit`].
    pub fn close(mut self) -> Result<()> {
        if self.writable {
            self.commit()?;
        }
        Ok(())
    }

    /// Whether the dataset was opened for writing.
    pub fn is_writable(&self) -> bool {
        self.writable
    }

    /// The number of the last commit (1 for a newly created file).
    pub fn commit_sequence(&self) -> u64 {
        self.commit.sequence
    }

    /// Counts the index entries and stored bytes by walking the whole index
    /// (time proportional to the number of chunks).
    ///
    /// # Errors
    /// `Corrupt` or `Io` from the index.
    pub fn stats(&self) -> Result<Stats> {
        self.stats_of(None)
    }

    /// [`Dataset::stats`] for the chunks of one variable (`file_bytes` is
    /// still the whole container's length).
    ///
    /// # Errors
    /// `NotFound` for an unknown variable; `Corrupt` or `Io` from the index.
    pub fn variable_stats(&self, var: impl VarRef) -> Result<Stats> {
        let v = var.index_in(self)?;
        self.stats_of(Some(v))
    }

    fn stats_of(&self, only: Option<usize>) -> Result<Stats> {
        let mut s = Stats { file_bytes: self.commit.file_len, ..Stats::default() };
        let mut count = |key: &Key, e: &Entry| {
            if only.is_some_and(|v| (key.layer >> 16) as usize != v) {
                return Ok(());
            }
            match e {
                Entry::Stored { length, .. } => {
                    s.stored_chunks += 1;
                    s.stored_bytes += u64::from(*length);
                    if let Some(var) =
                        self.vars.get((key.layer >> 16) as usize).and_then(|v| v.stored_layer((key.layer >> 8) as u8, key.layer as u8))
                    {
                        s.raw_bytes += codec::raw_len(var.dtype, var.chunk_elems) as u64;
                    }
                }
                Entry::Constant { .. } => s.constant_chunks += 1,
                Entry::Fill => s.fill_chunks += 1,
            }
            Ok(())
        };
        self.reader.for_each(&*self.storage, self.commit.root, &mut |k, e| {
            if self.pending.contains_key(k) || self.held.contains_key(k) {
                return Ok(());
            }
            count(k, e)
        })?;
        for (k, e) in &self.pending {
            if let (Some(e), false) = (e, self.held.contains_key(k)) {
                count(k, e)?;
            }
        }
        // Held chunks count as what the commit will make of them.
        for (k, h) in &self.held {
            if only.is_some_and(|v| h.layer.index != v) {
                continue;
            }
            let e = match prepare(&h.layer, &h.coords, &h.data) {
                Prepared::Entry(e) => e,
                Prepared::Bytes { codec, bytes, crc, hash } => {
                    Entry::Stored { codec, slot: 0, offset: 0, length: bytes.len() as u32, crc, hash }
                }
            };
            count(k, &e)?;
        }
        Ok(s)
    }
}

/// What a reader needs from the file to serve a commit: the newest intact
/// commit slot and its parsed descriptor.
struct Snapshot {
    line1: u64,
    commit: CommitSlot,
    desc: DescriptorJson,
    axes: Vec<Axis>,
    vars: Vec<Variable>,
    read_only: bool,
}

impl Snapshot {
    fn read(storage: &dyn Storage, limit: u64) -> Result<Snapshot> {
        Snapshot::read_keeping_prefix(storage, limit).map(|(snap, _)| snap)
    }

    /// [`Snapshot::read`], also returning the file's first bytes as read
    /// for this snapshot (empty when they had to be read again).
    fn read_keeping_prefix(storage: &dyn Storage, limit: u64) -> Result<(Snapshot, Vec<u8>)> {
        let io = |what: &str| {
            let what = what.to_string();
            move |e| Error::io(format!("reading the {what}"), e)
        };
        let mut file_len = storage.len().map_err(io("file length"))?;
        let (line1, head_len, first) = find_head(storage, file_len)?;
        if file_len < body_start(head_len) {
            return Err(Error::corrupt("commit slots", 0, head_len, format!("file ends at {file_len:#x}, inside the commit slots")));
        }
        // A writer may commit between our reading the length, the slots and
        // the descriptor (it may even replace the head's descriptor): the
        // checks below then fail although a newer, intact commit exists.
        // Reading everything again, twice at most, resolves that race.
        let mut attempt = 0;
        loop {
            if attempt > 0 {
                file_len = storage.len().map_err(io("file length"))?;
            }
            // The first attempt takes the slots and the descriptor from the bytes
            // the head search read (usually the whole head and more); a retry reads afresh.
            let prefixed = Prefixed { inner: storage, prefix: if attempt == 0 { &first } else { &[] } };
            let commit = choose_slot(read_slots(&prefixed, head_len)?, head_len)?;
            match Snapshot::for_slot_checked(&prefixed, commit, line1, file_len, limit) {
                Ok(snap) => return Ok((snap, if attempt == 0 { first } else { Vec::new() })),
                Err(e) if attempt < 2 && e.kind() == ErrorKind::Corrupt => attempt += 1,
                Err(e) => return Err(e),
            }
        }
    }

    /// The snapshot of a given (intact) commit slot.
    fn for_slot(storage: &dyn Storage, commit: CommitSlot, line1: u64) -> Result<Snapshot> {
        Snapshot::for_slot_within(storage, commit, line1, DEFAULT_MEMORY_LIMIT)
    }

    /// [`Snapshot::for_slot`], parsing the descriptor within a memory limit.
    fn for_slot_within(storage: &dyn Storage, commit: CommitSlot, line1: u64, limit: u64) -> Result<Snapshot> {
        let file_len = storage.len().map_err(|e| Error::io("reading the file length", e))?;
        Snapshot::for_slot_checked(storage, commit, line1, file_len, limit)
    }

    fn for_slot_checked(storage: &dyn Storage, commit: CommitSlot, line1: u64, file_len: u64, limit: u64) -> Result<Snapshot> {
        let desc_bytes = read_descriptor(storage, &commit, line1, file_len)?;
        let (desc, axes, vars, read_only) = DescriptorJson::parse(&desc_bytes, limit).map_err(|e| match e.kind() {
            ErrorKind::Corrupt => Error::corrupt("descriptor", 0, commit.desc_offset, e.message().to_string()),
            _ => e,
        })?;
        layout::check_flag(&desc, commit.head_len, commit.desc_offset)?;
        Ok(Snapshot { line1, commit, desc, axes, vars, read_only })
    }
}

/// Reads and decodes both commit slots.
fn read_slots(storage: &dyn Storage, head_len: u64) -> Result<[Result<CommitSlot>; 2]> {
    let size = slot_size(head_len) as usize;
    let mut slots = vec![0u8; 2 * size];
    storage.read_at(head_len, &mut slots).map_err(|e| Error::io("reading the commit slots", e))?;
    Ok([CommitSlot::decode(&slots[..size], 0, head_len), CommitSlot::decode(&slots[size..], 1, head_len)])
}

/// Fills `buf` from `bytes` (the file's first bytes) when they hold the
/// whole range, else from `file`.
fn read_through(bytes: &[u8], offset: u64, buf: &mut [u8], file: &dyn Storage) -> std::io::Result<()> {
    let start = usize::try_from(offset).unwrap_or(usize::MAX);
    match start.checked_add(buf.len()).and_then(|end| bytes.get(start..end)) {
        Some(src) => {
            buf.copy_from_slice(src);
            Ok(())
        }
        None => file.read_at(offset, buf),
    }
}

/// A storage whose first bytes are already in memory (read-only use).
struct Prefixed<'a> {
    inner: &'a dyn Storage,
    prefix: &'a [u8],
}

impl Storage for Prefixed<'_> {
    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        read_through(self.prefix, offset, buf, self.inner)
    }
    fn write_at(&self, _: u64, _: &[u8]) -> std::io::Result<()> {
        Err(std::io::Error::other("read-only view"))
    }
    fn set_len(&self, _: u64) -> std::io::Result<()> {
        Err(std::io::Error::other("read-only view"))
    }
    fn sync(&self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A reader's storage whose body bytes from the end of the commit slots up
/// to the committed length it opened at are kept in memory: those bytes
/// never change (SPEC.md 7.1), while the head and the slots, which a writer
/// rewrites, are always read from the file.
pub(crate) struct BodyPrefix {
    inner: Arc<dyn Storage>,
    /// The file's bytes from offset 0, of which those from `from` are served.
    bytes: Vec<u8>,
    from: u64,
    /// Set while verifying: every read goes to the file.
    bypass: std::sync::atomic::AtomicUsize,
}

impl BodyPrefix {
    fn new(inner: Arc<dyn Storage>, mut bytes: Vec<u8>, commit: &CommitSlot) -> Option<Arc<BodyPrefix>> {
        let from = body_start(commit.head_len);
        bytes.truncate(usize::try_from(commit.file_len).unwrap_or(usize::MAX));
        ((bytes.len() as u64) > from).then(|| Arc::new(BodyPrefix { inner, bytes, from, bypass: Default::default() }))
    }

    /// Sends every read to the file until the guard is dropped.
    pub(crate) fn bypass(&self) -> impl Drop + '_ {
        use std::sync::atomic::Ordering;
        struct Guard<'a>(&'a std::sync::atomic::AtomicUsize);
        impl Drop for Guard<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Relaxed);
            }
        }
        self.bypass.fetch_add(1, Ordering::Relaxed);
        Guard(&self.bypass)
    }
}

impl Storage for BodyPrefix {
    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let served = offset >= self.from && self.bypass.load(std::sync::atomic::Ordering::Relaxed) == 0;
        read_through(if served { &self.bytes } else { &[] }, offset, buf, &*self.inner)
    }
    fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> std::io::Result<()> {
        // Serve what the prefix holds; pass the rest on as one batch.
        let bypass = self.bypass.load(std::sync::atomic::Ordering::Relaxed) != 0;
        let mut rest = Vec::new();
        for (offset, buf) in reads.iter_mut() {
            let start = usize::try_from(*offset).unwrap_or(usize::MAX);
            match start.checked_add(buf.len()).and_then(|end| self.bytes.get(start..end)).filter(|_| *offset >= self.from && !bypass) {
                Some(src) => buf.copy_from_slice(src),
                None => rest.push((*offset, &mut **buf)),
            }
        }
        if rest.is_empty() {
            return Ok(());
        }
        self.inner.read_many(&mut rest)
    }
    fn will_read(&self, ranges: &[(u64, u64)]) {
        self.inner.will_read(ranges);
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.inner.write_at(offset, data)
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.inner.set_len(len)
    }
    fn sync(&self) -> std::io::Result<()> {
        self.inner.sync()
    }
}

/// Finds the version line and the head length by scanning for the second
/// newline; also returns the first bytes it read (up to 64 KiB), which
/// usually hold the commit slots too.
fn find_head(storage: &dyn Storage, file_len: u64) -> Result<(u64, u64, Vec<u8>)> {
    const STEP: u64 = 64 << 10;
    // build_head reserves twice the descriptor plus 1 KiB, rounded up (the
    // compact layout less).
    let limit = file_len.min(2 * MAX_DESCRIPTOR_BYTES + 2 * crate::commit::HEAD_ALIGN);
    let mut newlines = Vec::with_capacity(2);
    let mut first_line = Vec::new();
    // The first read goes straight into `first` (sized to the file when it
    // is small); a longer head is scanned through a second buffer.
    let mut first = vec![0u8; STEP.min(limit) as usize];
    let mut buf = Vec::new();
    let mut pos = 0u64;
    while newlines.len() < 2 && pos < limit {
        let n = STEP.min(limit - pos) as usize;
        let chunk = if pos == 0 {
            &mut first[..n]
        } else {
            buf.resize(n, 0);
            &mut buf[..n]
        };
        storage.read_at(pos, chunk).map_err(|e| Error::io("reading the head", e))?;
        if pos == 0 {
            first_line = chunk[..n.min(32)].to_vec();
        }
        let mut from = 0;
        while newlines.len() < 2 {
            let Some(i) = find_newline(&chunk[from..]) else { break };
            newlines.push(pos + (from + i) as u64);
            from += i + 1;
        }
        pos += n as u64;
    }
    let Some(&nl1) = newlines.first().filter(|&&p| p < 32) else {
        let shown = &first_line[..first_line.len().min(16)];
        if file_len == 0 {
            return Err(Error::corrupt("version line", 0, 0, "the file is empty"));
        }
        return Err(Error::corrupt(
            "version line",
            0,
            0,
            format!("not a libvds container (starts with {:?})", String::from_utf8_lossy(shown)),
        ));
    };
    crate::spec::parse_version_line(&first_line[..nl1 as usize])?;
    let Some(&nl2) = newlines.get(1) else {
        return Err(Error::corrupt("descriptor", 0, nl1 + 1, "the descriptor line has no end"));
    };
    let head_len = nl2 + 1;
    // A multiple of 4096 is the aligned layout, any other multiple of 128 the compact one.
    if head_len % crate::commit::COMPACT_ALIGN != 0 {
        return Err(Error::corrupt(
            "descriptor",
            0,
            nl1 + 1,
            format!("the head ends at {head_len:#x}, not at a multiple of {}", crate::commit::COMPACT_ALIGN),
        ));
    }
    Ok((nl1 + 1, head_len, first))
}

/// The position of the first newline in `bytes`. The head's second line is
/// padded to a 4 KiB boundary, so every open scans kilobytes: libc's memchr
/// does that many bytes at a time where a byte loop takes microseconds.
fn find_newline(bytes: &[u8]) -> Option<usize> {
    // SAFETY: memchr reads at most `bytes.len()` bytes from `bytes`, and a
    // non-null result points into them.
    let p = unsafe { libc::memchr(bytes.as_ptr().cast(), i32::from(b'\n'), bytes.len()) };
    (!p.is_null()).then(|| p as usize - bytes.as_ptr() as usize)
}

/// Reads and checks the descriptor the commit slot points at.
fn read_descriptor(storage: &dyn Storage, commit: &CommitSlot, line1: u64, file_len: u64) -> Result<Vec<u8>> {
    let (off, len) = (commit.desc_offset, commit.desc_len);
    let bad = |detail: String| Error::corrupt("descriptor", 0, off, detail);
    if commit.file_len > file_len {
        return Err(Error::corrupt(
            "commit slots",
            0,
            commit.head_len,
            format!("commit {} needs {} bytes but the file has {file_len}: it was truncated", commit.sequence, commit.file_len),
        ));
    }
    let end = off.checked_add(len).ok_or_else(|| bad("offset + length overflows".into()))?;
    let body = body_start(commit.head_len);
    let in_head = off == line1 && end < commit.head_len;
    let in_body = off >= body && end <= commit.file_len;
    if len > MAX_DESCRIPTOR_BYTES || !(in_head || in_body) {
        return Err(bad(format!("descriptor of {len} bytes lies outside the head and the committed body")));
    }
    let mut bytes = vec![0u8; len as usize];
    storage.read_at(off, &mut bytes).map_err(|e| Error::io("reading the descriptor", e))?;
    let computed = crc32(&bytes);
    if computed != commit.desc_crc {
        return Err(bad(format!("CRC32 mismatch (stored {:#010x}, computed {computed:#010x})", commit.desc_crc)));
    }
    Ok(bytes)
}

/// A constant entry's value must be a valid element (for bool: 0 or 1).
fn check_constant(var: &Variable, value: &[u8; 8], coords: &[u64]) -> Result<()> {
    if var.dtype == DType::Bool && value[0] > 1 {
        return Err(Error::new(
            ErrorKind::Corrupt,
            format!("corrupt index entry of chunk {coords:?} of variable {:?}: constant bool value {}", var.name, value[0]),
        ));
    }
    Ok(())
}

/// The cache identity of a stored chunk decoded as a chunk of `var`.
fn chunk_id(var: &Variable, slot: u16, offset: u64, length: u32, crc: u32) -> ChunkId {
    let dtype = DType::ALL.iter().position(|&d| d == var.dtype).unwrap_or(0) as u8;
    (slot, offset, length, crc, dtype, var.chunk_elems)
}

fn chunk_key(var: &Variable, coords: &[u64]) -> Key {
    let mut c = [0u32; 8];
    for (d, &x) in coords.iter().enumerate() {
        // Chunk coordinates are below the grid extent, which validation keeps under 2^32.
        c[d] = x as u32;
    }
    Key { layer: Key::layer_of(var.index) | u32::from(var.layer_id), coords: c }
}

/// The spans of a chunk's valid part (inside the variable's extent, margins
/// included), for the chunk in memory, and the element where it starts.
fn valid_part(var: &Variable, coords: &[u64]) -> (Vec<Span>, usize) {
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
fn pipeline<S, T: Send>(
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

/// Sets every element of a chunk buffer to `value` (one element, native order).
fn fill_chunk(var: &Variable, value: &[u8], buf: &mut [u8]) {
    fill_block(&[Span { count: var.chunk_elems, src: 0, dst: 1 }], &value[..var.esize()], buf, 0);
}

/// A constant entry's value as one native-order element, checked.
fn constant_native(var: &Variable, value: &[u8; 8], coords: &[u64]) -> Result<[u8; 8]> {
    check_constant(var, value, coords)?;
    let mut v = *value;
    codec::le_to_native(&mut v[..var.esize()], var.esize());
    Ok(v)
}

/// A chunk ready to be stored: an entry alone, or encoded bytes to write
/// with their codec byte, CRC32 and XXH64 (computed where the chunk was encoded).
enum Prepared {
    Entry(Entry),
    Bytes { codec: u8, bytes: Vec<u8>, crc: u32, hash: u64 },
}

/// Copies the region's elements for one chunk from the caller's buffer into
/// the chunk buffer (the reverse of a read), normalizing bools to 0 or 1.
fn gather(var: &Variable, plan: &ChunkPlan, data: &[u8], buf: &mut [u8]) {
    let rev: Vec<Span> = plan.spans.iter().map(|s| Span { count: s.count, src: s.dst, dst: s.src }).collect();
    copy_block(&rev, var.esize(), data, plan.dst0, buf, plan.src0);
    if var.dtype == DType::Bool {
        buf.iter_mut().for_each(|b| *b = u8::from(*b != 0));
    }
}

/// Reduces a chunk's contents to a fill or constant entry (judged on the
/// part inside the variable's extent), or encodes it.
fn prepare(var: &Variable, coords: &[u64], buf: &[u8]) -> Prepared {
    let esize = var.esize();
    let (valid, first) = valid_part(var, coords);
    if block_is_constant(&valid, esize, buf, first) {
        let mut value = [0u8; 8];
        value[..esize].copy_from_slice(&buf[first * esize..(first + 1) * esize]);
        codec::native_to_le(&mut value[..esize], esize);
        return Prepared::Entry(if value == var.fill { Entry::Fill } else { Entry::Constant { value } });
    }
    let (codec_byte, bytes) = codec::encode(var.dtype, var.codec, buf);
    let (crc, hash) = crate::hash::crc32_xxh64(&bytes);
    Prepared::Bytes { codec: codec_byte, bytes, crc, hash }
}

/// The number of cores to spread codec work over (asked once: on Linux the
/// answer takes a dozen system calls).
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get))
}

/// Below this many bytes of chunks to decode, one thread does it all.
const PARALLEL_MIN_BYTES: usize = 1 << 20;

/// How one chunk and a region meet.
#[derive(Clone)]
struct ChunkPlan {
    /// Per axis: count, stride in the chunk (`src`), stride in the caller's buffer (`dst`).
    spans: Vec<Span>,
    /// Element offset of the first selected element in the chunk.
    src0: usize,
    /// Element offset of that element in the caller's buffer.
    dst0: usize,
    /// Whether the region covers every valid element of the chunk.
    covers_chunk: bool,
}

impl ChunkPlan {
    fn dst_spans(&self) -> Vec<Span> {
        self.spans.iter().map(|s| Span { count: s.count, src: 0, dst: s.dst }).collect()
    }
}

/// Calls `f` for every chunk that holds at least one element of `region`:
/// in its own box when reading (`padded` false), or anywhere in the box
/// its margins extend (`padded` true, for writes, which must reach every
/// copy of a sample). Chunk-local positions count from the start of the
/// margin.
fn for_each_chunk(
    var: &Variable,
    region: &Region,
    order: Order,
    padded: bool,
    mut f: impl FnMut(&[u64], &ChunkPlan) -> Result<()>,
) -> Result<()> {
    let n = var.shape.len();
    let (start, shape, step) = (region.start(), region.shape(), region.step());
    let [mn, mp] = var.margin;
    let (ext_lo, ext_hi) = if padded { (mn, mp) } else { (0, 0) };
    // Sizes below are bounded by the chunk size (<= 256 MiB) or the caller's buffer, so they fit usize.
    let cdims: Vec<usize> = var.stored_chunk().iter().map(|&c| c as usize).collect();
    let cst = strides(&cdims, Order::C);
    let bdims: Vec<usize> = shape.iter().map(|&s| s as usize).collect();
    let bst = strides(&bdims, order);
    let lo: Vec<u64> = (0..n).map(|d| start[d].saturating_sub(ext_hi) / var.chunk[d]).collect();
    let hi: Vec<u64> = (0..n).map(|d| ((start[d] + (shape[d] - 1) * step[d] + ext_lo) / var.chunk[d]).min(var.grid[d] - 1)).collect();
    let mut coords = lo.clone();
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
            spans[d] = Span { count: count as usize, src: step[d] as usize * cst[d], dst: bst[d] };
            src0 += (first as i128 - origin) as usize * cst[d];
            dst0 += i_lo as usize * bst[d];
            covers &= step[d] == 1 && first == c0 && count == c_end - c0;
        }
        if !empty {
            f(&coords, &ChunkPlan { spans: spans.clone(), src0, dst0, covers_chunk: covers })?;
        }
        // Next chunk, last axis fastest.
        let mut d = n;
        loop {
            if d == 0 {
                break 'chunks;
            }
            d -= 1;
            if coords[d] < hi[d] {
                coords[d] += 1;
                break;
            }
            coords[d] = lo[d];
        }
    }
    Ok(())
}
