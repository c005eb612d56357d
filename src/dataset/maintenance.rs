//! Checking, repairing and compacting a container (SPEC.md section 7.7).

use super::open::{find_head, read_descriptor, read_slots, NewHead, Snapshot};
use super::read::check_constant;
use super::write::Prepared;
use super::Dataset;
use crate::commit::{body_start, slot_offset, slot_size, CommitSlot};
use crate::error::{invalid, Error, ErrorKind, Result};
use crate::index::{Entry, Key, PageReader};
use crate::spec::DescriptorJson;
use crate::spec::Variable;
use crate::storage::{FileStorage, Storage};
use std::fs::OpenOptions as FsOpenOptions;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What [`Dataset::verify`] found.
#[derive(Debug)]
#[non_exhaustive]
pub struct VerifyReport {
    /// The commit that was checked (the dataset's current one).
    pub commit: u64,
    /// The sequence number of the other commit slot, if it holds an intact earlier commit.
    pub previous_commit: Option<u64>,
    /// Every problem found, each with what and where.
    pub problems: Vec<Error>,
    /// Index pages read and checked.
    pub index_pages: u64,
    /// Chunk entries checked (stored chunks read, checksummed and decoded).
    pub chunks: u64,
    /// Bytes of the container the commit uses: head, commit slots, its
    /// index pages, its chunks and its descriptor.
    pub live_bytes: u64,
    /// The committed length of the container.
    pub file_bytes: u64,
    /// Bytes of the container no longer used by the commit (left behind by
    /// copy-on-write), which [`Dataset::compact`] reclaims.
    pub reclaimable_bytes: u64,
}

impl VerifyReport {
    /// Whether no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// How a container's bytes are used (see [`Dataset::space`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Space {
    /// The committed length of the container.
    pub file_bytes: u64,
    /// Bytes the commit uses: head, commit slots, its index pages, its
    /// chunks in the container and its descriptor.
    pub live_bytes: u64,
    /// Bytes no longer used (left behind by copy-on-write), which
    /// [`Dataset::compact`] reclaims.
    pub reclaimable_bytes: u64,
    /// Index pages of the commit.
    pub index_pages: u64,
    /// Whether every index page lies right after the commit slots, the
    /// root last, before any chunk: the cloud-optimized arrangement
    /// (SPEC.md 9.4, [`Dataset::compact_cloud_optimized`]).
    pub index_first: bool,
}

/// What [`Dataset::recover`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Recovery {
    /// The newest commit is intact; nothing was written.
    Intact {
        /// Its sequence number.
        commit: u64,
    },
    /// The newest commit was damaged; the file was rolled back to the older one.
    RolledBack {
        /// The damaged commit's sequence number.
        damaged: u64,
        /// The commit the file now shows (the older commit's contents).
        restored: u64,
    },
}

/// What [`Dataset::compact`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactReport {
    /// Container length before.
    pub before_bytes: u64,
    /// Container length after.
    pub after_bytes: u64,
    /// External-file slots folded into the container
    /// ([`Dataset::compact_folding_slots`]); their files are no longer used.
    pub folded_slots: Vec<String>,
}

/// Most problems collected before verification stops listing them.
const MAX_PROBLEMS: usize = 1000;

impl Dataset {
    /// Every entry of the current commit's index, in key order.
    pub(super) fn committed_entries(&self) -> Result<Vec<(Key, Entry)>> {
        let mut entries = Vec::new();
        self.reader.for_each(&*self.storage, self.commit.root, &mut |k, e| {
            entries.push((*k, *e));
            Ok(())
        })?;
        Ok(entries)
    }

    /// Checks every checksum and structure of the current commit: the
    /// descriptor, every index page, every index entry against the
    /// variables' chunk grids, and every stored chunk (read, checksummed and
    /// decoded). Problems are collected, each naming the structure and its
    /// offset, rather than stopping at the first. Time is proportional to the
    /// data; uncommitted writes are not checked.
    ///
    /// # Errors
    /// Only for failures that stop the check itself (for example the file
    /// cannot be read at all); damage is reported in the [`VerifyReport`].
    pub fn verify(&self) -> Result<VerifyReport> {
        self.verify_with_progress(&mut |_, _| {})
    }

    /// [`Dataset::verify`], calling `progress(done, total)` after each index
    /// entry is checked (`total` is the number of entries), for progress bars.
    ///
    /// # Errors
    /// As [`Dataset::verify`].
    pub fn verify_with_progress(&self, progress: &mut dyn FnMut(u64, u64)) -> Result<VerifyReport> {
        self.verify_inner(false, progress)
    }

    /// [`Dataset::verify`], and then, if nothing was found, the full check:
    /// every level of detail and every partitioning of each variable (and
    /// their masks) is compared with what level 0 of the first partitioning
    /// implies, so that a layer made of intact chunks holding other data is
    /// reported (a read that picked it would return that data); levels of
    /// detail of the bounded codec agree within its tolerance (SPEC.md 7.7). It
    /// reads and recomputes every stored layer, so it takes a few times as
    /// long as [`Dataset::verify`] on a variable with levels of detail or tiles.
    ///
    /// # Errors
    /// As [`Dataset::verify`].
    pub fn verify_full(&self) -> Result<VerifyReport> {
        self.verify_full_with_progress(&mut |_, _| {})
    }

    /// [`Dataset::verify_full`] with progress, as [`Dataset::verify_with_progress`].
    ///
    /// # Errors
    /// As [`Dataset::verify`].
    pub fn verify_full_with_progress(&self, progress: &mut dyn FnMut(u64, u64)) -> Result<VerifyReport> {
        self.verify_inner(true, progress)
    }

    fn verify_inner(&self, layers: bool, progress: &mut dyn FnMut(u64, u64)) -> Result<VerifyReport> {
        // Everything from the file itself, not from the copy a reader keeps.
        let _from_file = self.prefix.as_ref().map(|p| p.bypass());
        let storage = &*self.storage;
        let c = &self.commit;
        let mut problems = Vec::new();
        let found = std::cell::Cell::new(0usize);
        let mut note = |e: Error| {
            found.set(found.get() + 1);
            if problems.len() < MAX_PROBLEMS {
                problems.push(e);
            }
        };
        // The other slot: informational (a new file's slot 0 is empty by design).
        let previous_commit =
            read_slots(storage, c.head_len)?.into_iter().filter_map(std::result::Result::ok).map(|s| s.sequence).find(|&s| s != c.sequence);
        // The descriptor may have been damaged since it was read at open.
        if let Err(e) = read_descriptor(storage, c, self.line1, storage.len().map_err(|e| Error::io("reading the file length", e))?) {
            note(e);
        }
        // A fresh reader, so that nothing comes from the cache.
        let reader = PageReader::new(c.page_size, c.file_len);
        let mut pages = Vec::new();
        let mut entries: Vec<(Key, Entry)> = Vec::new();
        let mut damaged_pages = 0;
        reader.walk_checked(storage, c.root, &mut |off| pages.push(off), &mut |k, e| entries.push((*k, *e)), &mut |e| {
            damaged_pages += 1;
            note(e);
        });
        // With a damaged page the count cannot match; that page is reported already.
        if damaged_pages == 0 && entries.len() as u64 != c.entries {
            note(Error::corrupt(
                "commit slot",
                0,
                slot_offset(c.head_len, c.sequence),
                format!("records {} index entries, the index holds {}", c.entries, entries.len()),
            ));
        }
        let space = self.space_of(pages.len() as u64, &entries);
        let mut buf = Vec::new();
        // A stored range shared by several entries (deduplication) is read
        // and decoded once for each way of decoding it, not once per entry:
        // a small file whose thousand entries share one stream must not
        // cost a thousand decodes.
        let mut checked = std::collections::HashSet::new();
        for (done, (key, entry)) in entries.iter().enumerate() {
            progress(done as u64 + 1, entries.len() as u64);
            let Some((var, coords)) = self.check_key(key, &mut note) else { continue };
            match *entry {
                Entry::Stored { .. } => {
                    if !checked.insert((*entry, var.dtype, var.chunk_elems)) {
                        continue;
                    }
                    if let Err(e) = self.load_stored(var, &coords, *entry, &mut buf) {
                        note(e);
                    }
                }
                Entry::Constant { value } => {
                    if let Err(e) = check_constant(var, &value, &coords) {
                        note(e);
                    }
                }
                Entry::Fill => {}
            }
        }
        // Layers compared only over intact chunks: damage is reported already.
        if layers && found.get() == 0 {
            if let Err(e) = self.check_layers(&entries, &mut note) {
                note(e);
            }
        }
        Ok(VerifyReport {
            commit: c.sequence,
            previous_commit,
            problems,
            index_pages: space.index_pages,
            chunks: entries.len() as u64,
            live_bytes: space.live_bytes,
            file_bytes: space.file_bytes,
            reclaimable_bytes: space.reclaimable_bytes,
        })
    }

    /// How the committed container's bytes are used: what the commit needs
    /// and what [`Dataset::compact`] would reclaim. Walks the index (every
    /// page is read and checked) without reading chunks.
    ///
    /// # Errors
    /// `Corrupt` for the first damaged index page; `Io`.
    pub fn space(&self) -> Result<Space> {
        let c = &self.commit;
        let reader = PageReader::new(c.page_size, c.file_len);
        let (mut pages, mut entries, mut first) = (0u64, Vec::new(), None);
        reader.walk_checked(&*self.storage, c.root, &mut |_| pages += 1, &mut |k, e| entries.push((*k, *e)), &mut |e| {
            first.get_or_insert(e);
        });
        match first {
            Some(e) => Err(e),
            None => Ok(self.space_of(pages, &entries)),
        }
    }

    /// The space a commit with `pages` index pages and these entries uses.
    fn space_of(&self, pages: u64, entries: &[(Key, Entry)]) -> Space {
        let c = &self.commit;
        let mut live = body_start(c.head_len) + pages * u64::from(c.page_size);
        if c.desc_offset != self.line1 {
            live += c.desc_len;
        }
        // Chunks shared by several entries (deduplication) count once.
        let mut seen = std::collections::HashSet::new();
        for (_, e) in entries {
            if let Entry::Stored { slot: 0, length, offset, .. } = e {
                if seen.insert(*offset) {
                    live += u64::from(*length);
                }
            }
        }
        let ps = u64::from(c.page_size);
        // Distinct pages that end where `pages` pages from the body's start end fill that run.
        let index_first = c.root.is_some_and(|r| r.offset.checked_add(ps) == Some(body_start(c.head_len) + pages * ps));
        Space {
            file_bytes: c.file_len,
            live_bytes: live,
            reclaimable_bytes: c.file_len.saturating_sub(live),
            index_pages: pages,
            index_first,
        }
    }

    /// Checks that an index key names a chunk of a stored layer of a
    /// variable: a level of detail and partitioning it has, coordinates
    /// inside that layer's grid. Returns the layer and the coordinates.
    fn check_key(&self, key: &Key, note: &mut impl FnMut(Error)) -> Option<(&Variable, Vec<u64>)> {
        let v = (key.layer >> 16) as usize;
        let bad = |detail: String| Error::new(ErrorKind::Corrupt, format!("corrupt index entry {key:?}: {detail}"));
        let Some(var) = self.vars.get(v) else {
            note(bad(format!("variable {v} does not exist")));
            return None;
        };
        let (lod, part) = ((key.layer >> 8) as u8, key.layer as u8);
        let Some(layer) = var.stored_layer(lod, part) else {
            note(bad(format!("variable {:?} has no level of detail {lod} in partitioning {part}", var.name)));
            return None;
        };
        let n = layer.grid.len();
        let coords: Vec<u64> = key.coords[..n].iter().map(|&c| u64::from(c)).collect();
        if coords.iter().zip(&layer.grid).any(|(c, g)| c >= g) || key.coords[n..].iter().any(|&c| c != 0) {
            note(bad(format!("coordinates outside the chunk grid {:?} of {}", layer.grid, layer.name)));
            return None;
        }
        Some((layer, coords))
    }

    /// Rolls a damaged container back to its newest intact commit.
    ///
    /// The newest commit is checked as [`Dataset::verify`] does; if it is
    /// damaged and the commit in the other slot is intact, a new commit
    /// slot is written that restores the older commit's contents (the
    /// damaged commit's slot is the one overwritten, so a crash during
    /// recovery leaves the file as it was). Nothing else is written: the
    /// damaged bytes and their neighbours stay as they are, and later writes
    /// go after them. A container keeps two commits, so recovery can go
    /// back one commit.
    ///
    /// # Errors
    /// `Locked` when a writer has the file open; `Corrupt` when neither
    /// commit is intact (the message lists what is wrong with each); `Io`.
    pub fn recover(path: impl AsRef<Path>) -> Result<Recovery> {
        let path = path.as_ref();
        let (file, meta) = super::locking::open_rw_locked(path, true)?;
        let storage: Arc<dyn Storage> = Arc::new(FileStorage::opened(file, &meta));
        let file_len = storage.len().map_err(|e| Error::io("reading the file length", e))?;
        let (line1, head_len, _) = find_head(&*storage, file_len)?;
        let mut slots: Vec<CommitSlot> = read_slots(&*storage, head_len)?.into_iter().filter_map(std::result::Result::ok).collect();
        slots.sort_by_key(|s| std::cmp::Reverse(s.sequence));
        let Some(newest) = slots.first().cloned() else {
            return Err(Error::corrupt("commit slots", 0, head_len, "neither commit slot is intact; nothing to recover to"));
        };
        let mut reasons = Vec::new();
        for (i, slot) in slots.iter().enumerate() {
            match Self::check_commit(&storage, path, slot, line1) {
                Ok(()) if i == 0 => return Ok(Recovery::Intact { commit: slot.sequence }),
                Ok(()) => {
                    // Same parity as the damaged commit: its slot is the one overwritten.
                    // At the last sequence numbers, the damaged slot is zeroed instead
                    // (an empty slot never wins), leaving the intact one the newest.
                    let at = slot_offset(head_len, newest.sequence);
                    let (bytes, restored) = match newest.sequence.checked_add(2) {
                        Some(sequence) => {
                            let restored =
                                CommitSlot { sequence, file_len: newest.file_len.min(file_len).max(slot.file_len), ..slot.clone() };
                            (restored.encode(), restored)
                        }
                        None => (vec![0u8; slot_size(head_len) as usize], slot.clone()),
                    };
                    storage.sync().map_err(|e| Error::io("recovering: syncing the file", e))?;
                    storage.write_at(at, &bytes).map_err(|e| Error::io("recovering: writing the commit slot", e))?;
                    storage.sync().map_err(|e| Error::io("recovering: syncing the commit slot", e))?;
                    return Ok(Recovery::RolledBack { damaged: newest.sequence, restored: restored.sequence });
                }
                Err(e) => reasons.push(format!("commit {}: {e}", slot.sequence)),
            }
        }
        Err(Error::corrupt("commit slots", 0, head_len, format!("no intact commit to recover to ({})", reasons.join("; "))))
    }

    /// Opens the commit of `slot` (not necessarily the newest) and verifies it.
    fn check_commit(storage: &Arc<dyn Storage>, path: &Path, slot: &CommitSlot, line1: u64) -> Result<()> {
        let snap = Snapshot::for_slot(&**storage, slot.clone(), line1)?;
        let ds = Dataset::from_snapshot(storage.clone(), Some(path.to_path_buf()), false, super::Durability::Fsync, snap);
        let report = ds.verify()?;
        match report.problems.into_iter().next() {
            None => Ok(()),
            Some(first) => Err(first),
        }
    }

    /// Rewrites the container without the space copy-on-write left behind,
    /// and reports the lengths before and after. Chunks in the container are
    /// copied to a new file beside it, which replaces the container by an
    /// atomic rename once it is complete and synced: a crash at any moment
    /// leaves either the old or the new file, each whole. Chunks in external
    /// files stay where they are. Commit first: uncommitted writes are refused.
    ///
    /// # Errors
    /// `ReadOnly`, `Poisoned`, `InvalidArgument` (uncommitted changes, or no
    /// container on disk), `Corrupt` (a chunk or page fails its check: run
    /// verify and recover first), `Io`.
    pub fn compact(&mut self) -> Result<CompactReport> {
        self.compact_inner(Fold::Keep)
    }

    /// [`Dataset::compact`], also folding every external-file slot back into
    /// the container: their live chunks are copied into the new body and the
    /// new descriptor lists no slots. The slot files are left on disk,
    /// unreferenced, for the caller to delete (their names are in the
    /// report). Crash-safe in the same way: until the rename, the old
    /// container and its slots are whole.
    ///
    /// # Errors
    /// As [`Dataset::compact`], and as reading from the slots.
    pub fn compact_folding_slots(&mut self) -> Result<CompactReport> {
        self.compact_inner(Fold::IntoContainer)
    }

    /// [`Dataset::compact_folding_slots`] into the cloud-optimized
    /// arrangement (SPEC.md 9.4): every index page of the new container lies
    /// right after the commit slots, the root last, before the chunks, so a
    /// reader over range requests fetches the whole index (of up to about
    /// 30,000 chunks) in one request when it opens the container. It is an
    /// arrangement of the format, not a feature: any reader reads it, and
    /// later commits append their pages after the chunks as usual. The
    /// tool's `vds copy --cloud` and its uploads to object storage write it.
    /// A container small enough for the compact layout keeps it (its index
    /// is a page or two).
    ///
    /// # Errors
    /// As [`Dataset::compact_folding_slots`].
    pub fn compact_cloud_optimized(&mut self) -> Result<CompactReport> {
        self.compact_inner(Fold::Cloud)
    }

    /// [`Dataset::compact`] the other way round: the live chunks of the
    /// container are moved into external-file slots, chosen by this
    /// handle's slot policy ([`Dataset::set_slot_policy`]); the new
    /// container keeps its head, index and descriptor (and any chunk the
    /// policy routes to slot 0). The moved chunks are appended to the slot
    /// files, beyond their committed lengths, so until the rename the old
    /// container and its slots are whole; a crash leaves unreferenced bytes
    /// at the ends of the slot files.
    ///
    /// # Errors
    /// As [`Dataset::compact`]; `InvalidArgument` when the container has no
    /// external-file slot.
    pub fn compact_into_slots(&mut self) -> Result<CompactReport> {
        if self.desc.slots.is_empty() {
            return Err(invalid("the container has no external-file slot to move its chunks into"));
        }
        self.compact_inner(Fold::IntoSlots)
    }

    /// Writes a compacted copy of the last commit into `target` (an empty
    /// store), synced when the dataset's durability asks for it, and
    /// leaves this container untouched: [`Dataset::compact`] does this into
    /// a file beside the container, then renames it over the container.
    /// With `fold_slots`, external chunks are copied into the new body (as
    /// [`Dataset::compact_folding_slots`]); otherwise they stay in their
    /// files, which a copy opened without a path cannot reach.
    ///
    /// # Errors
    /// As [`Dataset::compact`]; `Io` from `target`.
    pub fn compact_to(&self, target: Arc<dyn Storage>, fold_slots: bool) -> Result<CompactReport> {
        self.check_compactable()?;
        let new = self.copy_into(target, None, if fold_slots { Fold::IntoContainer } else { Fold::Keep })?;
        let folded = if fold_slots { self.desc.slots.iter().map(|s| s.name.clone()).collect() } else { Vec::new() };
        Ok(CompactReport { before_bytes: self.commit.file_len, after_bytes: new.commit.file_len, folded_slots: folded })
    }

    fn check_compactable(&self) -> Result<()> {
        self.check_writable()?;
        self.check_not_fragment()?;
        if self.has_uncommitted() {
            return Err(invalid("commit before compacting: there are uncommitted changes"));
        }
        Ok(())
    }

    fn compact_inner(&mut self, fold: Fold) -> Result<CompactReport> {
        self.check_compactable()?;
        let path = self.path.clone().ok_or_else(|| invalid("compaction needs a container on disk"))?;
        let before = self.commit.file_len;
        let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
        tmp_name.push(".compacting");
        let tmp = path.with_file_name(tmp_name);
        // A leftover from a compaction that crashed is garbage.
        let _ = std::fs::remove_file(&tmp);
        let file = FsOpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| Error::io(format!("creating {}", tmp.display()), e))?;
        super::locking::lock(&file, &tmp, true)?;
        let storage: Arc<dyn Storage> = Arc::new(FileStorage::new(file));
        let result = match fold {
            Fold::Cloud => self.copy_cloud(storage, Some(&tmp)),
            _ => self.copy_into(storage, Some(&tmp), fold),
        };
        let mut new = match result {
            Ok(d) => d,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        };
        std::fs::rename(&tmp, &path).map_err(|e| Error::io(format!("renaming {} to {}", tmp.display(), path.display()), e))?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        if self.durability == super::Durability::Fsync {
            std::fs::File::open(&dir)
                .and_then(|f| f.sync_all())
                .map_err(|e| Error::io(format!("syncing directory {}", dir.display()), e))?;
        }
        new.path = Some(path);
        // The handle's settings survive the swap.
        new.policy = self.policy.clone();
        new.memory_limit = self.memory_limit;
        new.allow_external_paths = self.allow_external_paths;
        new.dedup_enabled = self.dedup_enabled;
        let folded: Vec<String> = if matches!(fold, Fold::IntoContainer | Fold::Cloud) {
            self.desc.slots.iter().map(|s| s.name.clone()).collect()
        } else {
            Vec::new()
        };
        if fold == Fold::Keep {
            // External files opened by this handle stay valid for the new one.
            new.slot_files = std::mem::take(&mut self.slot_files);
            new.slot_ends = std::mem::take(&mut self.slot_ends);
        }
        let after = new.commit.file_len;
        *self = new;
        Ok(CompactReport { before_bytes: before, after_bytes: after, folded_slots: folded })
    }

    /// Writes a new container into `storage` holding this commit's contents.
    pub(super) fn copy_into(&self, storage: Arc<dyn Storage>, tmp: Option<&Path>, fold: Fold) -> Result<Dataset> {
        let mut desc = DescriptorJson::clone(&self.desc);
        if fold == Fold::IntoContainer {
            desc.slots.clear();
        }
        // An aligned container stays aligned (older readers keep reading it);
        // a compact one whose data has grown past the limit becomes aligned.
        let compact = crate::commit::is_compact(self.commit.head_len) && super::Layout::Auto.is_compact_for(&desc);
        let mut new =
            Dataset::initialize(storage, tmp.map(Path::to_path_buf), NewHead::new(desc, compact, self.memory_limit)?, self.durability, 0)?;
        new.policy = self.policy.clone();
        new.allow_external_paths = self.allow_external_paths;
        new.memory_limit = self.memory_limit;
        let entries = self.committed_entries()?;
        // A chunk shared by several entries is copied once and stays shared.
        let mut moved: std::collections::HashMap<(u16, u64, u32, u32), Entry> = std::collections::HashMap::new();
        for (key, entry) in entries {
            let entry = match entry {
                Entry::Stored { codec: cb, slot, offset, length, crc, hash } if slot == 0 || fold == Fold::IntoContainer => {
                    match moved.get(&(slot, offset, length, crc)) {
                        Some(&e) => e,
                        None => {
                            let bytes = read_live_chunk(self, slot, offset, length, crc)?;
                            let layer = self
                                .vars
                                .get((key.layer >> 16) as usize)
                                .and_then(|v| v.stored_layer((key.layer >> 8) as u8, key.layer as u8));
                            let e = match (fold, layer) {
                                // Routed by the policy, as a new chunk would be.
                                (Fold::IntoSlots, Some(layer)) => {
                                    new.store_prepared(layer, Prepared::Bytes { codec: cb, bytes, crc, hash }, &[])?
                                }
                                _ => {
                                    let at = new.end;
                                    new.storage.write_at(at, &bytes).map_err(|e| Error::io("compacting: writing a chunk", e))?;
                                    new.end += u64::from(length);
                                    Entry::Stored { codec: cb, slot: 0, offset: at, length, crc, hash }
                                }
                            };
                            moved.insert((slot, offset, length, crc), e);
                            e
                        }
                    }
                }
                other => other,
            };
            new.pending.insert(key, Some(entry));
        }
        new.commit()?;
        Ok(new)
    }
}

/// The stored bytes of a chunk being copied by a compaction, checked
/// against the entry's CRC32.
pub(super) fn read_live_chunk(ds: &Dataset, slot: u16, offset: u64, length: u32, crc: u32) -> Result<Vec<u8>> {
    let from = ds.slot_storage(slot)?;
    ds.check_stored_range(&*from, slot, offset, length)?
        .map_err(|e| Error::corrupt("chunk", slot, offset, format!("{e}; run verify and recover before compacting")))?;
    let mut bytes = Vec::new();
    ds.reserve(&mut bytes, length as usize, "a chunk being compacted")?;
    from.read_at(offset, &mut bytes).map_err(|e| Error::io(format!("reading a chunk at offset {offset:#x} of file slot {slot}"), e))?;
    if crate::wire::crc32(&bytes) != crc {
        return Err(Error::corrupt("chunk", slot, offset, "CRC32 mismatch; run verify and recover before compacting"));
    }
    Ok(bytes)
}

/// Where compaction puts the live chunks.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Fold {
    /// Container chunks into the new body; external ones stay in their slots.
    Keep,
    /// Every chunk into the new body.
    IntoContainer,
    /// Container chunks into the slots the policy chooses.
    IntoSlots,
    /// Every chunk into the new body, after every index page (SPEC.md 9.4).
    Cloud,
}
