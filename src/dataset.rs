//! Datasets: an open container and what it holds (axes, variables,
//! attributes, statistics). Each concern of a dataset lives in a module of
//! its own below: options and builders, opening, the read path, the write
//! path, deduplication, committing, and the chunk plans they share.

use crate::array::Region;
use crate::cache::ChunkCache;
use crate::codec;
use crate::commit::CommitSlot;
use crate::error::{invalid, Error, ErrorKind, Result};
use crate::index::{Entry, Key, PageReader};
use crate::spec::{check_name, Axis, DType, DescBound, DescriptorJson, Variable};
use crate::storage::Storage;
use crate::wire::{self};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

mod blocks;
mod builder;
mod chunking;
mod cloud;
mod commit;
mod consistency;
mod dedup;
mod fragments;
mod growth;
mod layers;
mod layout;
mod locking;
mod maintenance;
mod open;
mod options;
mod plan;
mod quant;
mod read;
mod slots;
mod write;
mod writeback;
pub use builder::{DatasetBuilder, VariableBuilder};
pub use chunking::{default_block_shape, default_chunk_shape, DEFAULT_BLOCKS_MIN_CHUNK, DEFAULT_BLOCK_BYTES, DEFAULT_CHUNK_BYTES};
pub use fragments::MergeReport;
pub use layout::{Layout, COMPACT_LIMIT};
pub use locking::FILE_LOCKING_ENV;
pub use maintenance::{CompactReport, Recovery, Space, VerifyReport};
use open::BodyPrefix;
pub use options::{is_url, Durability, OpenOptions, SlotOpener, SlotPolicy};
use write::prepare;

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
    /// The descriptor as of the last commit plus this handle's changes, and
    /// its typed view; shared with other handles opened from the same bytes
    /// until this one changes them (`Arc::make_mut`).
    desc: Arc<DescriptorJson>,
    axes: Arc<Vec<Axis>>,
    vars: Arc<Vec<Variable>>,
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
    /// Bounds of the descriptor's length and parse cost, known since its
    /// last full check; None when unknown (after any other change of it).
    /// An attribute set within them is not checked again in full, so that
    /// setting many attributes costs each one its own size, not the
    /// descriptor's.
    desc_bound: Option<DescBound>,
    /// Next free byte of the container.
    end: u64,
    /// The length of the file a new container was written over, when it
    /// was longer: cut to the container at its first commit, or at close
    /// when none comes (SPEC.md 7.6).
    overwritten: Option<u64>,
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
    /// Whether the values being written were decoded from a layer (a copy
    /// between partitionings, a move on growth): a bounded codec then
    /// stores them losslessly, so that errors never add up (SPEC.md 6.6).
    writing_decoded: bool,
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
        self.change_attribute(None, key, value)
    }

    /// Sets (or with `None` removes) a variable attribute; committed with the next commit.
    ///
    /// # Errors
    /// As [`Dataset::set_attribute`], and `NotFound`.
    pub fn set_variable_attribute(&mut self, var: impl VarRef, key: &str, value: Option<Value>) -> Result<()> {
        self.check_writable()?;
        self.check_not_fragment()?;
        let v = var.index_in(self)?;
        self.change_attribute(Some(v), key, value)
    }

    /// Sets or removes an attribute of the dataset (`var` None) or of a variable.
    fn change_attribute(&mut self, var: Option<usize>, key: &str, value: Option<Value>) -> Result<()> {
        fn of(d: &mut DescriptorJson, var: Option<usize>) -> &mut Map<String, Value> {
            match var {
                None => &mut d.attributes,
                Some(v) => &mut d.variables[v].attributes,
            }
        }
        let there = match var {
            None => &self.desc.attributes,
            Some(v) => &self.desc.variables[v].attributes,
        };
        // Any attribute there may be removed (a file may hold names the builder no longer takes).
        if value.is_some() || !there.contains_key(key) {
            check_name("attribute", key).map_err(invalid)?;
        }
        // A variable's attributes sit two levels deeper in the descriptor than the dataset's.
        let depth = if var.is_some() { 4 } else { 2 };
        let growth = value.as_ref().map_or(Some(DescBound::NOTHING), |v| DescBound::of_member(key, v, depth));
        let bound = self.desc_bound;
        let attrs = of(self.desc_mut(), var);
        let old = match value {
            Some(v) => attrs.insert(key.into(), v),
            None => attrs.shift_remove(key),
        };
        self.descriptor_changed(bound, growth, |d| match old {
            Some(v) => of(d, var).insert(key.into(), v),
            None => of(d, var).shift_remove(key),
        })
    }

    /// The descriptor, to change: copied first if another handle shares it.
    /// Its bounds are forgotten (a caller that knows what it adds keeps them).
    fn desc_mut(&mut self) -> &mut DescriptorJson {
        self.desc_bound = None;
        Arc::make_mut(&mut self.desc)
    }

    /// Marks the descriptor changed by an attribute, or undoes the change
    /// with `undo` if the descriptor would not read back (too large, too
    /// costly to parse within the memory limit, nested too deeply). `bound`
    /// held before the change, which added at most `growth`: when their sum
    /// is within the limits (and the new value's nesting was checked where
    /// it sits), the descriptor is not serialized and checked in full.
    fn descriptor_changed(
        &mut self,
        bound: Option<DescBound>,
        growth: Option<DescBound>,
        undo: impl FnOnce(&mut DescriptorJson) -> Option<Value>,
    ) -> Result<()> {
        match self.desc.bound_after(bound, growth, self.memory_limit) {
            Ok(b) => {
                self.desc_bound = Some(b);
                self.desc_dirty = true;
                Ok(())
            }
            Err(why) => {
                undo(self.desc_mut());
                self.desc_bound = bound;
                Err(invalid(why))
            }
        }
    }

    /// The descriptor as of the last commit plus uncommitted attribute changes, as JSON text.
    pub fn descriptor_json(&self) -> String {
        String::from_utf8(self.desc.to_bytes()).unwrap_or_default()
    }

    /// Chooses where new stored chunks go.
    ///
    /// # Errors
    /// `InvalidArgument` when the policy names a slot the dataset does not
    /// have; `ReadOnly` on a dataset open read-only, which stores no chunk;
    /// `Poisoned` after a failed write, as every change.
    pub fn set_slot_policy(&mut self, policy: SlotPolicy) -> Result<()> {
        self.check_not_fragment()?;
        self.check_writable()?;
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
        let n = region.check_within(&var.shape, &format_args!("variable {:?}", var.name))?;
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

    /// Sizes `buf` to `n` zero bytes, within the memory limit and without
    /// aborting when memory is short.
    fn reserve(&self, buf: &mut Vec<u8>, n: usize, what: &str) -> Result<()> {
        plan::within_limit(n, self.memory_limit, what)?;
        plan::zeroed(buf, n, what)
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
            let e = prepare(&h.layer, &h.coords, &h.data, h.lossless).entry_unplaced();
            count(k, &e)?;
        }
        Ok(s)
    }
}
