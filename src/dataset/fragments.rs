//! Parallel writers (SPEC.md section 11): each process writes the chunks of
//! its region into its own fragment file, with no lock or message between
//! them; one short, atomic merge adopts the fragments as external-file
//! slots of the container and brings the other layers up to date.

use super::slots::{self, create_slot_file, id_text, parse_slot_header, SLOT_HEADER};
use super::{Dataset, Durability, OpenOptions, SlotPolicy};
use crate::array::Region;
use crate::error::{invalid, Error, ErrorKind, Result};
use crate::index::{read_leaf_entry, write_leaf_entry, Entry, Key};
use crate::spec::{check_slot_name, SlotJson, MAX_DIMS};
use crate::wire::{crc32, get_u32, get_u64, put_u32, put_u64};
use serde_json::Map;
use std::collections::HashMap;
use std::fs::OpenOptions as FsOpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

const FOOTER_MAGIC: &[u8; 8] = b"VDSFRAGT";
const FOOTER: usize = 48;
const ENTRY: usize = 64;
const REGION: usize = 8 + 16 * MAX_DIMS;
/// The file slot number that stands for "this fragment" in its entries.
const SELF_SLOT: u16 = u16::MAX;

/// A dataset writing a fragment rather than its container.
#[derive(Debug)]
pub(crate) struct Fragment {
    /// The slot (in this handle's descriptor only) that receives its chunks.
    slot: u16,
    /// Fingerprint of the container's variables.
    layout: u32,
}

/// What [`Dataset::merge_fragments`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeReport {
    /// Fragments adopted, each now an external-file slot of the container.
    pub merged: Vec<String>,
    /// Fragments left alone, with the reason: never finished (a worker that
    /// crashed or did not commit), or merged before.
    pub skipped: Vec<(String, String)>,
    /// Index entries adopted.
    pub chunks: u64,
}

/// The variables' structure (not their attributes): what a fragment's keys
/// and chunks depend on. A fragment merges only into a container with the same.
fn layout(ds: &Dataset) -> u32 {
    let vars: Vec<_> = ds
        .desc
        .variables
        .iter()
        .map(|v| {
            let mut v = v.clone();
            v.attributes = Map::new();
            v.extra = Map::new();
            v
        })
        .collect();
    crc32(&serde_json::to_vec(&vars).unwrap_or_default())
}

impl Dataset {
    /// Opens the container at `container` (read-only, without its writer
    /// lock) to write a fragment: a file `name` beside it, which must not
    /// exist. Writes through the returned dataset go to the fragment; the
    /// container is never written. [`Dataset::commit`] (or `close`) seals
    /// the fragment with the list of its chunks; until then a merge skips
    /// it. Partial-chunk writes start from the container's committed
    /// contents. Levels of detail and partitionings are computed by the
    /// merge, not by the fragment. Chunks two fragments both write make the
    /// merge fail, so give each writer whole chunks.
    ///
    /// ```
    /// # use vds::*;
    /// # let dir = std::env::temp_dir().join(format!("vds-doc-frag-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// # let _ = std::fs::remove_file(dir.join("w0.frag"));
    /// # let _ = std::fs::remove_file(dir.join("w1.frag"));
    /// let path = dir.join("parallel.vds");
    /// DatasetBuilder::new()
    ///     .overwrite(true)
    ///     .axis(Axis::new("x", 8))
    ///     .variable(VariableBuilder::new("v", DType::Int32, &["x"]).chunk(&[4]))
    ///     .create(&path)?
    ///     .close()?;
    /// // In each worker process (no lock between them):
    /// for (w, name) in ["w0.frag", "w1.frag"].iter().enumerate() {
    ///     let mut f = Dataset::create_fragment(&path, name)?;
    ///     f.write("v", &Region::new(&[4 * w as u64], &[4])?, Order::C, &[w as i32; 4])?;
    ///     f.close()?;
    /// }
    /// // Once, when they are done:
    /// let mut ds = Dataset::open_rw(&path)?;
    /// let report = ds.merge_fragments(&["w0.frag", "w1.frag"])?;
    /// assert_eq!(report.chunks, 2);
    /// assert_eq!(ds.read_vec::<i32>("v", &Region::full(&[8])?, Order::C)?, [0, 0, 0, 0, 1, 1, 1, 1]);
    /// # Ok::<(), vds::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`Dataset::open`]; `InvalidArgument` for a name that is not a
    /// confined relative path; `AlreadyExists`/`Io` creating the file.
    pub fn create_fragment(container: impl AsRef<Path>, name: &str) -> Result<Dataset> {
        let container = container.as_ref();
        check_slot_name(name).map_err(invalid)?;
        if let Some(url) = container.to_str().filter(|p| super::is_url(p)) {
            return Err(Error::new(
                ErrorKind::ReadOnly,
                format!("{url}: a container opened by URL is read-only; fragments are written beside a local one"),
            ));
        }
        let mut ds = OpenOptions::new().open(container)?;
        let dir = container.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let path = dir.join(name);
        if path == container {
            return Err(invalid(format!("fragment {name:?} is the container itself")));
        }
        let (file, json) = create_slot_file(&path, name, false, slots::KIND_FRAGMENT)?;
        ds.writable = true;
        ds.dedup_enabled = false;
        let slot = ds.adopt_slot(file, json, &path)?;
        ds.desc_dirty = false;
        ds.policy = SlotPolicy::Fixed(slot);
        let layout = layout(&ds);
        ds.fragment = Some(Box::new(Fragment { slot, layout }));
        Ok(ds)
    }

    /// Whether this dataset writes a fragment.
    pub fn is_fragment(&self) -> bool {
        self.fragment.is_some()
    }

    /// Refuses changes a fragment cannot carry: everything but data.
    pub(super) fn check_not_fragment(&self) -> Result<()> {
        if self.fragment.is_some() {
            return Err(invalid("a fragment carries data only: change the descriptor through the container"));
        }
        Ok(())
    }

    /// Seals a fragment: appends the list of its chunks and written regions
    /// after them, with a checksummed footer, and syncs the file. Later
    /// writes and seals append again; the last seal counts.
    pub(super) fn seal_fragment(&mut self) -> Result<()> {
        let Some(f) = &self.fragment else { return Err(Error::new(ErrorKind::Internal, "not a fragment")) };
        let slot = f.slot;
        let mut out = Vec::new();
        for (key, entry) in &self.pending {
            let Some(mut entry) = *entry else { continue };
            if let Entry::Stored { slot: s, .. } = &mut entry {
                if *s != slot {
                    return Err(Error::new(ErrorKind::Internal, "a fragment's chunk outside the fragment"));
                }
                *s = SELF_SLOT;
            }
            let mut e = [0u8; ENTRY];
            write_leaf_entry(key, &entry, &mut e);
            out.extend_from_slice(&e);
        }
        for (v, (start, end)) in &self.dirty {
            let mut r = [0u8; REGION];
            put_u32(&mut r, 0, *v as u32);
            put_u32(&mut r, 4, start.len() as u32);
            for d in 0..start.len() {
                put_u64(&mut r, 8 + 8 * d, start[d]);
                put_u64(&mut r, 8 + 8 * MAX_DIMS + 8 * d, end[d]);
            }
            out.extend_from_slice(&r);
        }
        let storage = self.slot_storage(slot)?;
        let at = self.slot_ends[usize::from(slot) - 1].unwrap_or(SLOT_HEADER);
        let mut footer = [0u8; FOOTER];
        footer[..8].copy_from_slice(FOOTER_MAGIC);
        put_u64(&mut footer, 8, at);
        put_u64(&mut footer, 16, (self.pending.len()) as u64);
        put_u64(&mut footer, 24, self.dirty.len() as u64);
        put_u32(&mut footer, 32, f.layout);
        out.extend_from_slice(&footer);
        let n = out.len();
        let crc = crc32(&out[..n - 4]);
        put_u32(&mut out, n - 4, crc);
        let io = |e| Error::io(format!("sealing fragment {}", self.desc.slots[usize::from(slot) - 1].name), e);
        storage.write_at(at, &out).map_err(io)?;
        if self.durability == Durability::Fsync {
            storage.sync().map_err(io)?;
        }
        self.slot_ends[usize::from(slot) - 1] = Some(at + n as u64);
        Ok(())
    }

    /// Adopts finished fragments (files beside the container, by name) into
    /// the container in one commit: each becomes an external-file slot, its
    /// chunks enter the index, and the levels of detail and partitionings
    /// of the regions they wrote are brought up to date. Fragments never
    /// sealed (a crashed worker's) and fragments merged before are skipped
    /// and reported. Nothing is merged when two fragments hold the same
    /// chunk or a fragment was written for another container: the error
    /// names them. A crash during the merge leaves the container as it was.
    ///
    /// # Errors
    /// `InvalidArgument` (uncommitted changes; overlapping fragments; a
    /// fragment of another layout; a bad name), `Corrupt` (a sealed
    /// fragment whose entries do not fit its file or the variables),
    /// `NotFound`/`Io`, and as [`Dataset::commit`].
    pub fn merge_fragments(&mut self, names: &[&str]) -> Result<MergeReport> {
        self.check_writable()?;
        self.check_not_fragment()?;
        if self.has_uncommitted() {
            return Err(invalid("commit before merging fragments: there are uncommitted changes"));
        }
        let path = self.path.clone().ok_or_else(|| invalid("fragments need a container on disk"))?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let want_layout = layout(self);
        let mut report = MergeReport::default();
        let mut found = Vec::new();
        let mut owner: HashMap<Key, usize> = HashMap::new();
        for &name in names {
            check_slot_name(name).map_err(invalid)?;
            let fpath = dir.join(name);
            let (file, _) = crate::storage::open_regular(&fpath, FsOpenOptions::new().read(true).write(true))
                .map_err(|e| Error::io(format!("opening fragment {}", fpath.display()), e))?;
            let frag = match self.read_fragment(&file, name, want_layout)? {
                Ok(f) => f,
                Err(why) => {
                    report.skipped.push((name.to_string(), why));
                    continue;
                }
            };
            for (key, _) in &frag.entries {
                if let Some(&other) = owner.get(key) {
                    let v = &self.vars[(key.layer >> 16) as usize];
                    return Err(invalid(format!(
                        "fragments {:?} and {name:?} both hold chunk {:?} of variable {:?} (layer {:#x}): nothing was merged",
                        names[other],
                        &key.coords[..v.shape.len()],
                        v.name,
                        key.layer
                    )));
                }
                owner.insert(*key, found.len());
            }
            found.push((name, file, fpath, frag));
        }
        // Every fragment adopted becomes a slot: the descriptor listing them all must read back.
        self.check_room_for_slots(&found.iter().map(|f| f.0).collect::<Vec<_>>())?;
        for (name, file, fpath, frag) in found {
            let len = file.metadata().map_err(|e| Error::io(format!("reading the length of {}", fpath.display()), e))?.len();
            let json = SlotJson { name: name.to_string(), id: Some(id_text(frag.id)), length: Some(len), extra: Map::new() };
            report.chunks += frag.entries.len() as u64;
            let slot = self.adopt_slot(file, json, &fpath)?;
            // The file is complete: nothing more is written to it.
            self.slot_ends[usize::from(slot) - 1] = None;
            for (key, mut entry) in frag.entries {
                if let Entry::Stored { slot: s, .. } = &mut entry {
                    *s = slot;
                }
                self.pending.insert(key, Some(entry));
            }
            for (v, region) in frag.regions {
                self.mark_dirty(v, &region);
            }
            report.merged.push(name.to_string());
        }
        if report.merged.is_empty() {
            return Ok(report);
        }
        if let Err(e) = self.commit() {
            return Err(e.context("merging fragments"));
        }
        Ok(report)
    }

    /// Reads and checks a fragment's seal. The inner error is why it is
    /// skipped (not sealed, merged before); the outer one why the merge fails.
    fn read_fragment(&self, file: &std::fs::File, name: &str, want_layout: u32) -> Result<std::result::Result<Sealed, String>> {
        let bad = |why: String| Error::corrupt(format!("fragment {name:?}"), 0, 0, why);
        let io = |e| Error::io(format!("reading fragment {name:?}"), e);
        let len = file.metadata().map_err(io)?.len();
        let mut h = [0u8; SLOT_HEADER as usize];
        if len < SLOT_HEADER + FOOTER as u64 {
            return Ok(Err(format!("not sealed: {len} bytes, too short for a header and a seal")));
        }
        file.read_exact_at(&mut h, 0).map_err(io)?;
        let (id, kind) = parse_slot_header(&h).map_err(bad)?;
        if kind != slots::KIND_FRAGMENT {
            return Err(bad(format!("the file is not a fragment (kind {kind})")));
        }
        if self.desc.slots.iter().any(|s| slots::id_value(s) == Some(id)) {
            return Ok(Err(format!("merged before (slot id {})", id_text(id))));
        }
        let mut footer = [0u8; FOOTER];
        file.read_exact_at(&mut footer, len - FOOTER as u64).map_err(io)?;
        if &footer[..8] != FOOTER_MAGIC {
            return Ok(Err("not sealed: no seal at the end of the file (the writer did not commit)".into()));
        }
        let (at, n_entries, n_regions) = (get_u64(&footer, 8), get_u64(&footer, 16), get_u64(&footer, 24));
        let size = n_entries.checked_mul(ENTRY as u64).and_then(|e| n_regions.checked_mul(REGION as u64).and_then(|r| e.checked_add(r)));
        if size.and_then(|s| s.checked_add(at)).and_then(|s| s.checked_add(FOOTER as u64)) != Some(len) || at < SLOT_HEADER {
            return Ok(Err("not sealed: the seal's sizes do not match the file".into()));
        }
        let size = size.unwrap_or(0);
        if size > self.memory_limit {
            return Err(Error::new(
                ErrorKind::OutOfMemory,
                format!("fragment {name:?} lists {size} bytes of entries, above the memory limit"),
            ));
        }
        let mut body = Vec::new();
        self.reserve(&mut body, size as usize + FOOTER, "a fragment's seal")?;
        file.read_exact_at(&mut body, at).map_err(io)?;
        let crc = crc32(&body[..body.len() - 4]);
        if get_u32(&body, body.len() - 4) != crc {
            return Ok(Err("not sealed: the seal's CRC32 does not match (an interrupted seal)".into()));
        }
        if get_u32(&footer, 32) != want_layout {
            return Err(invalid(format!("fragment {name:?} was written for a container with other variables")));
        }
        let mut entries = Vec::with_capacity(n_entries as usize);
        for (i, e) in body[..n_entries as usize * ENTRY].chunks_exact(ENTRY).enumerate() {
            let (key, entry) = read_leaf_entry(e).map_err(|k| bad(format!("entry {i} has unknown kind {k}")))?;
            let var = self.vars.get((key.layer >> 16) as usize).and_then(|v| v.stored_layer((key.layer >> 8) as u8, key.layer as u8));
            let Some(var) = var else { return Err(bad(format!("entry {i} names layer {:#x}, which the container lacks", key.layer))) };
            let n = var.grid.len();
            if key.coords.iter().enumerate().any(|(d, &c)| if d < n { u64::from(c) >= var.grid[d] } else { c != 0 }) {
                return Err(bad(format!("entry {i}: chunk {:?} lies outside the grid {:?} of {}", &key.coords[..n], var.grid, var.name)));
            }
            if let Entry::Stored { slot, offset, length, .. } = entry {
                if slot != SELF_SLOT || offset < SLOT_HEADER || offset.saturating_add(u64::from(length)) > at {
                    return Err(bad(format!("entry {i}: a chunk at {offset:#x} of {length} bytes outside the fragment's chunks")));
                }
            }
            entries.push((key, entry));
        }
        let mut regions = Vec::with_capacity(n_regions as usize);
        for r in body[n_entries as usize * ENTRY..size as usize].chunks_exact(REGION) {
            let v = get_u32(r, 0) as usize;
            let n = get_u32(r, 4) as usize;
            let Some(var) = self.vars.get(v).filter(|var| var.shape.len() == n) else {
                return Err(bad(format!("a written region names variable {v} with {n} dimensions")));
            };
            let start: Vec<u64> = (0..n).map(|d| get_u64(r, 8 + 8 * d)).collect();
            let end: Vec<u64> = (0..n).map(|d| get_u64(r, 8 + 8 * MAX_DIMS + 8 * d).min(var.shape[d])).collect();
            if start.iter().zip(&end).any(|(s, e)| s >= e) {
                continue; // outside the current extent: nothing to update
            }
            let shape: Vec<u64> = start.iter().zip(&end).map(|(s, e)| e - s).collect();
            regions.push((v, Region::new(&start, &shape)?));
        }
        Ok(Ok(Sealed { id, entries, regions }))
    }
}

/// A fragment's sealed contents.
struct Sealed {
    id: u64,
    entries: Vec<(Key, Entry)>,
    regions: Vec<(usize, Region)>,
}
