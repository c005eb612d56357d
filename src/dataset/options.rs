//! Opening a container: the options (write access, durability, memory
//! and cache limits, locking, how external slots are reached), and the
//! durability and slot-placement policies.

use super::{locking, Dataset, DEFAULT_MEMORY_LIMIT};
use crate::error::{Error, ErrorKind, Result};
use crate::storage::{open_regular, FileStorage, Storage};
use std::fs::OpenOptions as FsOpenOptions;
use std::path::Path;
use std::sync::Arc;

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
    /// where each read is a round trip over a network (`remote::RemoteStorage` asks
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
            ds.prefetch_index(self.index_prefetch as usize);
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
    ///
    /// A path that starts with `http://`, `https://` or `s3://` ([`is_url`])
    /// is a URL: in a build with the cargo feature `remote` the container is
    /// read in place through [`crate::remote::open_with`] (read-only: asking
    /// to write is `ReadOnly`); in a build without it, opening one is
    /// `UnsupportedFeature`. A local file whose name starts that way opens as
    /// `./http://...`.
    pub fn open(&self, path: impl AsRef<Path>) -> Result<Dataset> {
        let path = path.as_ref();
        if let Some(url) = path.to_str().filter(|p| is_url(p)) {
            return self.open_url(url);
        }
        let (file, meta) = if self.write {
            locking::open_rw_locked(path, self.file_locking)?
        } else {
            open_regular(path, FsOpenOptions::new().read(true)).map_err(|e| Error::io(format!("opening {}", path.display()), e))?
        };
        let storage: Arc<dyn Storage> = Arc::new(FileStorage::opened(file, &meta));
        Dataset::load(storage, Some(path.to_path_buf()), self.write, self.durability, self.limit())
            .map(|d| self.apply(d))
            .map_err(|e| e.context(path.display()))
    }
    #[cfg(feature = "remote")]
    fn open_url(&self, url: &str) -> Result<Dataset> {
        if self.write {
            return Err(Error::new(ErrorKind::ReadOnly, format!("{url}: a container opened by URL is read-only")));
        }
        crate::remote::open_with(url, self)
    }
    #[cfg(not(feature = "remote"))]
    fn open_url(&self, url: &str) -> Result<Dataset> {
        Err(Error::new(
            ErrorKind::UnsupportedFeature,
            format!("{url}: this build of libvds opens no URLs (it was built without the cargo feature `remote`)"),
        ))
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

/// Whether `path` names a container by URL rather than a local file: it
/// starts with `http://`, `https://` or `s3://` (in any case).
pub fn is_url(path: &str) -> bool {
    ["http://", "https://", "s3://"].iter().any(|p| path.len() >= p.len() && path.as_bytes()[..p.len()].eq_ignore_ascii_case(p.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_from_paths() {
        for url in ["http://h/x.vds", "HTTPS://h/x.vds", "s3://bucket/key.vds", "S3://b/k"] {
            assert!(is_url(url), "{url}");
        }
        for path in ["./http://h/x.vds", "http:/x", "s3:/b", "file:///x.vds", "/data/s3://x", "", "é3://x"] {
            assert!(!is_url(path), "{path}");
        }
    }

    /// Without the cargo feature `remote` a URL is an unsupported feature,
    /// never a file name; with it, a URL opens read-only (checked before any
    /// request, so this needs no server).
    #[test]
    fn a_url_opens_only_read_only_and_only_with_the_remote_feature() {
        let e = OpenOptions::new().write(true).open("https://example.invalid/survey.vds").unwrap_err();
        if cfg!(feature = "remote") {
            assert_eq!(e.kind(), ErrorKind::ReadOnly, "{e}");
        } else {
            assert_eq!(e.kind(), ErrorKind::UnsupportedFeature, "{e}");
            assert!(e.to_string().contains("cargo feature `remote`"), "{e}");
        }
        assert!(e.to_string().contains("https://example.invalid/survey.vds"), "{e}");
        // Nor is a fragment written beside a container named by URL.
        let e = Dataset::create_fragment("https://example.invalid/survey.vds", "w0.frag").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ReadOnly, "{e}");
    }
}
