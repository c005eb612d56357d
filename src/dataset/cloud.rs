//! The cloud-optimized arrangement (SPEC.md 9.4): a compacted container
//! whose index pages all lie together right after the commit slots, the
//! root last, before any chunk, so that a reader over range requests
//! fetches the whole index of thousands of chunks in one request; and a
//! reader's prefetch of the index when it opens a container.

use super::maintenance::{read_live_chunk, Fold};
use super::open::NewHead;
use super::Dataset;
use crate::commit::{body_start, CommitSlot};
use crate::error::{Error, Result};
use crate::index::{self, Change, Entry, PageReader, PageWriter, DEFAULT_PAGE};
use crate::spec::DescriptorJson;
use crate::spec::FORMAT_MINOR;
use crate::storage::Storage;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// A chunk of the new container: where its bytes come from and how long they are.
type Source = (u16, u64, u32, u32);

impl Dataset {
    /// Writes a copy of the last commit into `target` (an empty store) in
    /// the cloud-optimized arrangement, external chunks folded in, as
    /// [`Dataset::compact_cloud_optimized`] does, and leaves this container
    /// untouched; a read-only handle may do it too. For publishing a
    /// container that a reader will fetch over HTTP or S3.
    ///
    /// # Errors
    /// `InvalidArgument` for a writable handle with uncommitted changes or a
    /// fragment; `Corrupt` for a damaged chunk or index page; `Io`.
    pub fn copy_cloud_optimized_to(&self, target: Arc<dyn Storage>) -> Result<super::CompactReport> {
        self.check_not_fragment()?;
        if self.writable && self.has_uncommitted() {
            return Err(crate::error::invalid("commit before copying: there are uncommitted changes"));
        }
        let new = self.copy_cloud(target, None)?;
        let folded = self.desc.slots.iter().map(|s| s.name.clone()).collect();
        Ok(super::CompactReport { before_bytes: self.commit.file_len, after_bytes: new.commit.file_len, folded_slots: folded })
    }

    /// Writes a new container into `storage` holding this commit's contents
    /// in the cloud-optimized arrangement: head and slots, every index page
    /// (the root last), then every chunk, external ones folded in.
    pub(super) fn copy_cloud(&self, storage: Arc<dyn Storage>, tmp: Option<&Path>) -> Result<Dataset> {
        let mut desc = DescriptorJson::clone(&self.desc);
        desc.slots.clear();
        if crate::commit::is_compact(self.commit.head_len) && super::Layout::Auto.is_compact_for(&desc) {
            // As an ordinary compaction: the index of a compact container is a page or two after its chunks.
            return self.copy_into(storage, tmp, Fold::IntoContainer);
        }
        let mut new =
            Dataset::initialize(storage, tmp.map(Path::to_path_buf), NewHead::new(desc, false, self.memory_limit)?, self.durability, 0)?;
        new.memory_limit = self.memory_limit;
        let entries = self.committed_entries()?;
        // Each distinct stored chunk gets a place after the index, in key order,
        // counted from the index's end; shared chunks stay shared.
        let mut place: HashMap<Source, u64> = HashMap::new();
        let mut order: Vec<Source> = Vec::new();
        let mut body = 0u64;
        for (_, e) in &entries {
            if let Entry::Stored { slot, offset, length, crc, .. } = *e {
                place.entry((slot, offset, length, crc)).or_insert_with(|| {
                    order.push((slot, offset, length, crc));
                    body += u64::from(length);
                    body - u64::from(length)
                });
            }
        }
        let start = body_start(new.commit.head_len);
        let pages = |index_len: u64| -> Result<(PageWriter, Option<index::Root>, u64)> {
            let changes: Vec<Change> = entries
                .iter()
                .map(|(k, e)| {
                    let e = match *e {
                        Entry::Stored { codec, slot, offset, length, crc, hash } => {
                            let at = start + index_len + place[&(slot, offset, length, crc)];
                            Entry::Stored { codec, slot: 0, offset: at, length, crc, hash }
                        }
                        other => other,
                    };
                    (*k, Some(e))
                })
                .collect();
            let mut w = PageWriter { page_size: DEFAULT_PAGE as usize, base: start, buf: Vec::new() };
            let unused = PageReader::new(DEFAULT_PAGE, 0);
            let (root, count) = index::merge(&unused, &*new.storage, None, 0, &changes, &mut w)?;
            Ok((w, root, count))
        };
        // The index's size depends on the number of entries only, not on the
        // offsets they hold: measured once, then written with the real offsets.
        let index_len = pages(0)?.0.buf.len() as u64;
        let (w, root, count) = pages(index_len)?;
        let ps = u64::from(DEFAULT_PAGE);
        if w.buf.len() as u64 != index_len || root.is_some_and(|r| r.offset + ps != start + index_len) {
            return Err(Error::new(crate::ErrorKind::Internal, "the cloud-optimized index changed size between its two passes"));
        }
        let io = |what: &'static str| move |e| Error::io(format!("writing the cloud-optimized copy: {what}"), e);
        new.storage.write_at(start, &w.buf).map_err(io("index pages"))?;
        new.end = start + index_len;
        for (slot, offset, length, crc) in order {
            let bytes = read_live_chunk(self, slot, offset, length, crc)?;
            new.storage.write_at(new.end, &bytes).map_err(io("a chunk"))?;
            new.end += u64::from(length);
        }
        let next = CommitSlot {
            minor: FORMAT_MINOR,
            page_size: DEFAULT_PAGE,
            sequence: new.commit.sequence + 1,
            head_len: new.commit.head_len,
            file_len: new.end,
            desc_offset: new.commit.desc_offset,
            desc_len: new.commit.desc_len,
            desc_crc: new.commit.desc_crc,
            root,
            entries: count,
        };
        new.publish(&next)?;
        Ok(new)
    }

    /// Reads and caches the index when a read-only container opens: in the
    /// cloud-optimized arrangement (the root page ends within `budget` pages
    /// of the body's start) every page, fetched in one read; otherwise the
    /// pages above the leaves, level by level, within `budget` pages.
    pub(super) fn prefetch_index(&self, budget: usize) {
        let Some(root) = self.commit.root else { return };
        let ps = u64::from(self.reader.page_size);
        let start = body_start(self.commit.head_len);
        let end = root.offset.saturating_add(ps);
        // No more bytes than the pages the page cache can keep: a larger
        // budget must not read a large file whole into memory.
        let pages = budget.min(index::CACHE_PAGES) as u64;
        if root.offset >= start && end <= self.commit.file_len && end - start <= pages * ps {
            let mut bytes = vec![0u8; (end - start) as usize];
            if self.storage.read_at(start, &mut bytes).is_ok() {
                let window = Window { inner: &*self.storage, start, bytes: &bytes };
                self.reader.prefetch(&window, Some(root), budget, true);
                return;
            }
        }
        self.reader.prefetch(&*self.storage, Some(root), budget, false);
    }
}

/// A storage whose bytes from `start` are in memory (read-only use).
struct Window<'a> {
    inner: &'a dyn Storage,
    start: u64,
    bytes: &'a [u8],
}

impl Storage for Window<'_> {
    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let from = offset.checked_sub(self.start).and_then(|o| usize::try_from(o).ok());
        match from.and_then(|o| self.bytes.get(o..o.checked_add(buf.len())?)) {
            Some(src) => {
                buf.copy_from_slice(src);
                Ok(())
            }
            None => self.inner.read_at(offset, buf),
        }
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
