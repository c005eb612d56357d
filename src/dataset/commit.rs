//! Committing (SPEC.md section 7.2): new index pages written copy-on-write,
//! the descriptor, and the commit slot published between syncs; rolling
//! back and closing.

use super::open::Snapshot;
use super::{Dataset, Durability};
use crate::commit::{slot_offset, CommitSlot};
use crate::error::{Error, ErrorKind, Result};
use crate::index::{self, PageReader};
use crate::spec::FORMAT_MINOR;
use crate::wire::crc32;

impl Dataset {
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
            self.cut_overwritten();
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
        // (The descriptor, shared until changed, is copied only when one has.)
        let moved = |(s, end): (&crate::spec::SlotJson, &Option<u64>)| s.id.is_some() && end.is_some() && s.length != *end;
        if self.desc.slots.iter().zip(&self.slot_ends).any(moved) {
            self.desc_bound = None;
            for (s, end) in std::sync::Arc::make_mut(&mut self.desc).slots.iter_mut().zip(&self.slot_ends) {
                if s.id.is_some() && end.is_some() {
                    s.length = *end;
                }
            }
            self.desc_dirty = true;
        }
        // 3. A changed descriptor goes to the body; the slot points at it.
        let (mut desc_offset, mut desc_len, mut desc_crc) = (self.commit.desc_offset, self.commit.desc_len, self.commit.desc_crc);
        let json = self.desc_dirty.then(|| self.desc.to_bytes());
        if let Some(json) = &json {
            self.storage.write_at(self.end, json).map_err(io("the descriptor"))?;
            (desc_offset, desc_len, desc_crc) = (self.end, json.len() as u64, crc32(json));
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
        self.desc_dirty = false;
        if let Some(json) = json {
            self.mirror_descriptor(&json, next);
        }
        self.cut_overwritten();
        Ok(())
    }

    /// Cuts off what is left of the file a new container was written over
    /// beyond the container's end (SPEC.md 7.6): at the first commit, at a
    /// commit with nothing to commit, or when the dataset is dropped. A
    /// failure leaves those bytes where they are, beyond the committed
    /// length, as a writer that crashed would (7.3).
    fn cut_overwritten(&mut self) {
        if let Some(old) = self.overwritten.take() {
            if old > self.end {
                let _ = self.storage.set_len(self.end);
            }
        }
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
    pub(super) fn publish(&mut self, slot: &CommitSlot) -> Result<()> {
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
            self.desc_bound = None;
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
}

impl Drop for Dataset {
    /// A writer dropped before its first commit still cuts off the old
    /// file's bytes beyond its end (it keeps its own uncommitted ones). Not
    /// after a failed commit: its slot may have reached the file, and it
    /// could refer to bytes beyond what this handle believes committed.
    fn drop(&mut self) {
        if self.writable && !self.poisoned {
            self.cut_overwritten();
        }
    }
}
