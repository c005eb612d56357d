//! The chunk index: a B+tree of fixed-size, checksummed pages (SPEC.md section 5).
//!
//! ```text
//! page (page_size bytes: 4096, or 256 in a small compact container)
//!   0    4  magic "VDSI"
//!   4    1  level: 0 for a leaf, n for a branch whose children are at level n-1
//!   5    1  reserved, 0
//!   6    2  count: number of entries, 1..=capacity
//!   8    .. count entries, sorted by key, strictly increasing
//!   P-4  4  CRC32 of bytes [0, P-4)
//!
//! key (36 bytes)
//!   0    4  layer: variable << 16 | level of detail << 8 | partitioning
//!   4   32  chunk coordinates c[0..8], u32 each; unused trailing ones are 0
//!
//! leaf entry (64 bytes)       branch entry (48 bytes)
//!   0   36  key                 0   36  key: the smallest key in the child
//!   36   1  kind                36   4  CRC32 of the child page
//!   37   1  codec byte          40   8  offset of the child page
//!   38   2  file slot
//!   40   8  offset
//!   48   4  stored length
//!   52   4  CRC32 of the stored bytes
//!   56   8  constant value (kind 2), else 0
//! ```
//!
//! A parent stores its children's CRCs, and a child's level must be exactly
//! one less than its parent's: a page that points back into its own path (or
//! at any page that is not the one the parent wrote) fails one of those two
//! checks, so every descent ends after at most `root level + 1` pages.

use crate::error::{Error, Result};
use crate::storage::Storage;
use crate::wire::{crc32, get_u16, get_u32, get_u64, put_u16, put_u32, put_u64};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

const MAGIC: &[u8; 4] = b"VDSI";
const HEADER: usize = 8;
const TRAILER: usize = 4;
const LEAF_ENTRY: usize = 64;
const BRANCH_ENTRY: usize = 48;
/// The deepest tree accepted (a root level above this is corrupt).
pub(crate) const MAX_LEVEL: u8 = 24;
/// Smallest and largest page sizes a file may declare.
pub(crate) const MIN_PAGE: u32 = 512;
pub(crate) const MAX_PAGE: u32 = 65536;
/// The smallest page size of the compact layout (SPEC.md 1.1).
pub(crate) const MIN_COMPACT_PAGE: u32 = 256;
/// The page size this library writes.
pub(crate) const DEFAULT_PAGE: u32 = 4096;
/// The page size this library writes while a compact container is small.
pub(crate) const COMPACT_PAGE: u32 = 256;

/// Entry kinds.
pub(crate) const KIND_STORED: u8 = 1;
pub(crate) const KIND_CONSTANT: u8 = 2;
pub(crate) const KIND_FILL: u8 = 3;

/// The key of a chunk: its layer and its coordinates in the chunk grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Key {
    pub layer: u32,
    pub coords: [u32; 8],
}

impl Key {
    /// Layer of level of detail 0, partitioning 0 of variable `var`.
    pub(crate) fn layer_of(var: usize) -> u32 {
        // Variables are limited to 65535 by descriptor validation.
        (var as u32) << 16
    }
    fn read(b: &[u8]) -> Key {
        let mut coords = [0u32; 8];
        for (i, c) in coords.iter_mut().enumerate() {
            *c = get_u32(b, 4 + 4 * i);
        }
        Key { layer: get_u32(b, 0), coords }
    }
    fn write(&self, b: &mut [u8]) {
        put_u32(b, 0, self.layer);
        for (i, c) in self.coords.iter().enumerate() {
            put_u32(b, 4 + 4 * i, *c);
        }
    }
}

/// Where a chunk lives, or what it is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Entry {
    /// Stored bytes in file `slot` (0 = container) at `offset`, `length`
    /// bytes, checksum `crc`, and their XXH64 `hash` (0: not recorded).
    Stored { codec: u8, slot: u16, offset: u64, length: u32, crc: u32, hash: u64 },
    /// Every element equals `value` (little-endian element bytes).
    Constant { value: [u8; 8] },
    /// Every element equals the variable's fill value.
    Fill,
}

/// A reference to a page: the smallest key below it, where it is, and its CRC.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChildRef {
    pub key: Key,
    pub offset: u64,
    pub crc: u32,
}

/// The root of a tree as recorded in a commit slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Root {
    pub offset: u64,
    pub crc: u32,
    pub level: u8,
}

/// A decoded page.
#[derive(Clone)]
pub(crate) enum Page {
    Leaf(Vec<(Key, Entry)>),
    Branch(Vec<ChildRef>),
}

fn leaf_capacity(page_size: usize) -> usize {
    (page_size - HEADER - TRAILER) / LEAF_ENTRY
}
fn branch_capacity(page_size: usize) -> usize {
    (page_size - HEADER - TRAILER) / BRANCH_ENTRY
}

/// Decodes and checks one page read from `offset`. `level` is the level its parent expects.
pub(crate) fn decode_page(b: &[u8], offset: u64, level: u8, expected_crc: Option<u32>) -> Result<Page> {
    let bad = |detail: String| Error::corrupt("index page", 0, offset, detail);
    let p = b.len();
    // The checksum first: nothing below it is looked at in a page that fails it.
    let stored = get_u32(b, p - TRAILER);
    let computed = crc32(&b[..p - TRAILER]);
    if stored != computed {
        return Err(bad(format!("CRC32 mismatch (stored {stored:#010x}, computed {computed:#010x})")));
    }
    if let Some(want) = expected_crc {
        if want != stored {
            return Err(bad(format!("page CRC32 {stored:#010x} differs from {want:#010x} recorded by its parent")));
        }
    }
    if &b[..4] != MAGIC {
        return Err(bad("bad magic".into()));
    }
    if b[4] != level {
        return Err(bad(format!("level {} where level {level} was expected", b[4])));
    }
    let count = usize::from(get_u16(b, 6));
    let cap = if level == 0 { leaf_capacity(p) } else { branch_capacity(p) };
    if count == 0 || count > cap {
        return Err(bad(format!("entry count {count} outside 1..={cap}")));
    }
    let mut prev: Option<Key> = None;
    let mut check_order = |k: Key| -> Result<()> {
        if prev.is_some_and(|q| q >= k) {
            return Err(bad("keys are not strictly increasing".into()));
        }
        prev = Some(k);
        Ok(())
    };
    if level == 0 {
        let mut v = Vec::with_capacity(count);
        for i in 0..count {
            let (key, entry) = read_leaf_entry(&b[HEADER + i * LEAF_ENTRY..HEADER + (i + 1) * LEAF_ENTRY])
                .map_err(|k| bad(format!("entry {i} has unknown kind {k}")))?;
            check_order(key)?;
            v.push((key, entry));
        }
        Ok(Page::Leaf(v))
    } else {
        let mut v = Vec::with_capacity(count);
        for i in 0..count {
            let e = &b[HEADER + i * BRANCH_ENTRY..HEADER + (i + 1) * BRANCH_ENTRY];
            let key = Key::read(e);
            check_order(key)?;
            v.push(ChildRef { key, crc: get_u32(e, 36), offset: get_u64(e, 40) });
        }
        Ok(Page::Branch(v))
    }
}

/// Encodes one leaf entry into `e` (64 zeroed bytes).
pub(crate) fn write_leaf_entry(key: &Key, entry: &Entry, e: &mut [u8]) {
    key.write(e);
    match *entry {
        Entry::Stored { codec, slot, offset, length, crc, hash } => {
            e[36] = KIND_STORED;
            e[37] = codec;
            put_u16(e, 38, slot);
            put_u64(e, 40, offset);
            put_u32(e, 48, length);
            put_u32(e, 52, crc);
            put_u64(e, 56, hash);
        }
        Entry::Constant { value } => {
            e[36] = KIND_CONSTANT;
            e[56..64].copy_from_slice(&value);
        }
        Entry::Fill => e[36] = KIND_FILL,
    }
}

/// Decodes one leaf entry; the error is an unknown kind byte.
pub(crate) fn read_leaf_entry(e: &[u8]) -> std::result::Result<(Key, Entry), u8> {
    let key = Key::read(e);
    let entry = match e[36] {
        KIND_STORED => Entry::Stored {
            codec: e[37],
            slot: get_u16(e, 38),
            offset: get_u64(e, 40),
            length: get_u32(e, 48),
            crc: get_u32(e, 52),
            hash: get_u64(e, 56),
        },
        KIND_CONSTANT => Entry::Constant { value: e[56..64].try_into().unwrap_or([0; 8]) },
        KIND_FILL => Entry::Fill,
        k => return Err(k),
    };
    Ok((key, entry))
}

fn encode_leaf(entries: &[(Key, Entry)], page_size: usize) -> Vec<u8> {
    let mut b = vec![0u8; page_size];
    b[..4].copy_from_slice(MAGIC);
    b[4] = 0;
    put_u16(&mut b, 6, entries.len() as u16);
    for (i, (key, entry)) in entries.iter().enumerate() {
        write_leaf_entry(key, entry, &mut b[HEADER + i * LEAF_ENTRY..HEADER + (i + 1) * LEAF_ENTRY]);
    }
    seal(&mut b);
    b
}

fn encode_branch(children: &[ChildRef], level: u8, page_size: usize) -> Vec<u8> {
    let mut b = vec![0u8; page_size];
    b[..4].copy_from_slice(MAGIC);
    b[4] = level;
    put_u16(&mut b, 6, children.len() as u16);
    for (i, c) in children.iter().enumerate() {
        let e = &mut b[HEADER + i * BRANCH_ENTRY..HEADER + (i + 1) * BRANCH_ENTRY];
        c.key.write(e);
        put_u32(e, 36, c.crc);
        put_u64(e, 40, c.offset);
    }
    seal(&mut b);
    b
}

fn seal(b: &mut [u8]) {
    let p = b.len();
    let crc = crc32(&b[..p - TRAILER]);
    put_u32(b, p - TRAILER, crc);
}

/// A page a walk of the index read or found cached, under its cache key
/// (offset, CRC, level).
type Walked = ((u64, u32, u8), Arc<Page>);

/// Reads pages of a committed tree, with a bounded cache of decoded pages.
pub(crate) struct PageReader {
    pub page_size: u32,
    /// Pages must lie entirely below this offset (the committed end of the file).
    pub limit: u64,
    /// Decoded pages by (offset, CRC, level): the level is part of the key so
    /// that a cached page is only ever returned at the level it was checked at.
    cache: Mutex<HashMap<(u64, u32, u8), Arc<Page>>>,
}

/// Most pages one walk of the index for many keys asks for, read or not
/// (about 4 MiB of 4 KiB pages); the open's prefetch stays within it too.
pub(crate) const CACHE_PAGES: usize = 1024;
/// Most decoded pages kept per reader (about 8 MiB of the library's 4 KiB
/// pages; a file with larger pages, up to 64 KiB, takes more): the
/// cache is emptied when a page read would take it past this, and before a
/// walk whose pages would leave it less than [`CACHE_PAGES`] / 2 of room.
pub(crate) const MAX_CACHED: usize = 2 * CACHE_PAGES;

impl PageReader {
    pub(crate) fn new(page_size: u32, limit: u64) -> PageReader {
        PageReader { page_size, limit, cache: Mutex::new(HashMap::new()) }
    }

    fn load(&self, storage: &dyn Storage, r: &ChildRef, level: u8) -> Result<Arc<Page>> {
        let cache_key = (r.offset, r.crc, level);
        if let Some(p) = self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&cache_key) {
            return Ok(p.clone());
        }
        let ps = u64::from(self.page_size);
        if r.offset.checked_add(ps).is_none_or(|end| end > self.limit) {
            return Err(Error::corrupt(
                "index page",
                0,
                r.offset,
                format!("page of {ps} bytes lies beyond the committed end of the file ({:#x})", self.limit),
            ));
        }
        let mut buf = vec![0u8; ps as usize];
        storage.read_at(r.offset, &mut buf).map_err(|e| Error::io(format!("reading index page at offset {:#x}", r.offset), e))?;
        let page = Arc::new(decode_page(&buf, r.offset, level, Some(r.crc))?);
        let mut cache = self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
        cache.insert(cache_key, page.clone());
        Ok(page)
    }

    /// Reads and caches the branch pages of the tree (all but the leaves,
    /// and the leaves too with `leaves`), level by level, each level in one
    /// [`Storage::read_many`], stopping before a level that would take the
    /// total past `budget` pages. Pages that fail to read or decode are left
    /// out: the lookup that needs one reads it again and reports the failure.
    pub(crate) fn prefetch(&self, storage: &dyn Storage, root: Option<Root>, budget: usize, leaves: bool) {
        let Some(root) = root else { return };
        let mut level = root.level;
        let mut refs = vec![ChildRef { key: Key { layer: 0, coords: [0; 8] }, offset: root.offset, crc: root.crc }];
        let mut taken = 0;
        let mut walked = Vec::new();
        // Levels strictly decrease, so this ends; the budget bounds the work.
        while (level > 0 || leaves) && !refs.is_empty() && taken + refs.len() <= budget.min(CACHE_PAGES) {
            taken += refs.len();
            let pages = self.level_pages(storage, &refs, level);
            let mut next = Vec::new();
            for (r, page) in refs.iter().zip(&pages) {
                if let Some(page) = page {
                    if let Page::Branch(children) = &**page {
                        next.extend_from_slice(children);
                    }
                    walked.push(((r.offset, r.crc, level), page.clone()));
                }
            }
            refs = next;
            if level == 0 {
                break;
            }
            level -= 1;
        }
        self.keep(walked);
    }

    /// The pages `refs`, all at `level`: those cached, and the others read
    /// with one [`Storage::read_many`] (not cached here). None for a page
    /// that lies beyond the committed end, fails to read or fails to decode:
    /// the lookup that needs it reads it again and reports the failure.
    fn level_pages(&self, storage: &dyn Storage, refs: &[ChildRef], level: u8) -> Vec<Option<Arc<Page>>> {
        let ps = self.page_size as usize;
        let mut pages: Vec<Option<Arc<Page>>> = {
            let cache = self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            refs.iter().map(|r| cache.get(&(r.offset, r.crc, level)).cloned()).collect()
        };
        let wanted: Vec<usize> = (0..refs.len())
            .filter(|&i| pages[i].is_none() && refs[i].offset.checked_add(ps as u64).is_some_and(|end| end <= self.limit))
            .collect();
        if wanted.is_empty() {
            return pages;
        }
        let mut bufs = vec![0u8; wanted.len() * ps];
        let mut reads: Vec<(u64, &mut [u8])> = wanted.iter().map(|&i| refs[i].offset).zip(bufs.chunks_mut(ps)).collect();
        if storage.read_many(&mut reads).is_ok() {
            for (&i, buf) in wanted.iter().zip(bufs.chunks(ps)) {
                pages[i] = decode_page(buf, refs[i].offset, level, Some(refs[i].crc)).ok().map(Arc::new);
            }
        }
        pages
    }

    /// Puts the pages of a walk into the cache together, emptying it first
    /// when they would leave less than [`CACHE_PAGES`] / 2 pages of room
    /// before it is full ([`MAX_CACHED`]): the lookups that follow find every
    /// one of them, and the pages they still read themselves do not empty the
    /// cache under them.
    fn keep(&self, walked: Vec<Walked>) {
        let mut cache = self.cache.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if cache.len() + walked.len() > MAX_CACHED - CACHE_PAGES / 2 {
            cache.clear();
        }
        cache.extend(walked);
    }

    /// Reads and caches the pages that looking up `keys` will read, a level
    /// at a time, each level's pages not yet cached in one
    /// [`Storage::read_many`]: over a network, the lookups of a region's
    /// chunks then cost a round trip per level of the index instead of one
    /// per leaf. At most `keys.len()` pages a level, and at most
    /// [`CACHE_PAGES`] in all: a caller gives keys in batches. The walk keeps
    /// its own handles on the pages, and caches them all at the end.
    pub(crate) fn prefetch_keys(&self, storage: &dyn Storage, root: Option<Root>, keys: &[Key]) {
        let Some(root) = root else { return };
        let mut level = root.level;
        let mut refs = vec![ChildRef { key: Key { layer: 0, coords: [0; 8] }, offset: root.offset, crc: root.crc }];
        // Each key's page at `level`, as an index into `refs`; None once its path ends.
        let mut at: Vec<Option<usize>> = vec![Some(0); keys.len()];
        // Each key's nearest page to the right of its path, and that page's
        // level, as `lookup` keeps it: a key found absent past the end of its
        // leaf, or below every key of a branch, reads that page's leftmost
        // path to check bounds, so those paths are fetched too.
        let mut right: Vec<Option<(ChildRef, u8)>> = vec![None; keys.len()];
        let mut checks: Vec<(ChildRef, u8)> = Vec::new();
        let mut walked = Vec::new();
        // Pages asked for, read or not (those that fail to decode count too).
        let mut taken = 0;
        // Levels strictly decrease, so this ends.
        loop {
            if taken + refs.len() > CACHE_PAGES {
                break;
            }
            taken += refs.len();
            let pages = self.level_pages(storage, &refs, level);
            walked.extend(refs.iter().zip(&pages).filter_map(|(r, p)| p.clone().map(|p| ((r.offset, r.crc, level), p))));
            if level == 0 {
                for ((key, a), r) in keys.iter().zip(&at).zip(&right) {
                    if let Some(Page::Leaf(entries)) = a.and_then(|i| pages[i].as_deref()) {
                        if entries.last().is_some_and(|(last, _)| last < key) {
                            checks.extend(*r);
                        }
                    }
                }
                break;
            }
            let mut next: Vec<ChildRef> = Vec::new();
            let mut seen: HashMap<(u64, u32), usize> = HashMap::new();
            for ((key, a), r) in keys.iter().zip(at.iter_mut()).zip(right.iter_mut()) {
                let Some(Page::Branch(children)) = a.and_then(|i| pages[i].as_deref()) else {
                    *a = None;
                    continue;
                };
                let i = children.partition_point(|c| c.key <= *key);
                if let Some(next) = children.get(i) {
                    *r = Some((*next, level - 1));
                }
                if i == 0 {
                    checks.extend(*r);
                }
                *a = i.checked_sub(1).map(|i| {
                    let child = children[i];
                    *seen.entry((child.offset, child.crc)).or_insert_with(|| {
                        next.push(child);
                        next.len() - 1
                    })
                });
            }
            if next.is_empty() {
                break;
            }
            refs = next;
            level -= 1;
        }
        self.fetch_leftmost(storage, checks, &mut taken, &mut walked);
        self.keep(walked);
    }

    /// Reads the leftmost paths down from the pages `starts` (each with its
    /// level) to their first leaves, all the paths a level at a time,
    /// adding each page to `walked`, within [`CACHE_PAGES`] pages asked for
    /// in all (`taken`).
    fn fetch_leftmost(&self, storage: &dyn Storage, starts: Vec<(ChildRef, u8)>, taken: &mut usize, walked: &mut Vec<Walked>) {
        let mut frontier = starts;
        // Each step goes one level down every path, so this ends.
        while !frontier.is_empty() {
            let mut levels: Vec<u8> = frontier.iter().map(|&(_, l)| l).collect();
            levels.sort_unstable_by(|a, b| b.cmp(a));
            levels.dedup();
            let mut next = Vec::new();
            for level in levels {
                let mut refs: Vec<ChildRef> = frontier.iter().filter(|&&(_, l)| l == level).map(|&(r, _)| r).collect();
                refs.sort_unstable_by_key(|r| (r.offset, r.crc));
                refs.dedup_by_key(|r| (r.offset, r.crc));
                if *taken + refs.len() > CACHE_PAGES {
                    return;
                }
                *taken += refs.len();
                let pages = self.level_pages(storage, &refs, level);
                for (r, page) in refs.iter().zip(pages) {
                    let Some(page) = page else { continue };
                    if let (Page::Branch(children), Some(below)) = (&*page, level.checked_sub(1)) {
                        next.push((children[0], below));
                    }
                    walked.push(((r.offset, r.crc, level), page));
                }
            }
            frontier = next;
        }
    }

    /// Finds the entry for `key`, reading at most `root.level + 1` pages.
    pub(crate) fn lookup(&self, storage: &dyn Storage, root: Option<Root>, key: &Key) -> Result<Option<Entry>> {
        let Some(root) = root else { return Ok(None) };
        let mut r = ChildRef { key: *key, offset: root.offset, crc: root.crc };
        let mut level = root.level;
        let mut bounds = Bounds::ROOT;
        // The nearest page to the right of the path: where `key` would be if
        // a parent's key hid it (then that page breaks its bounds).
        let mut right = None;
        loop {
            let page = self.load(storage, &r, level)?;
            bounds.check(&page, r.offset)?;
            match &*page {
                Page::Leaf(entries) => {
                    return match entries.binary_search_by(|(k, _)| k.cmp(key)) {
                        Ok(i) => Ok(Some(entries[i].1)),
                        Err(i) if i == entries.len() => self.check_leftmost(storage, right).map(|()| None),
                        Err(_) => Ok(None),
                    };
                }
                Page::Branch(children) => {
                    let i = children.partition_point(|c| c.key <= *key);
                    let below = child_level(level, r.offset)?;
                    if let Some(next) = children.get(i) {
                        right = Some((*next, below, bounds.child(children, i)));
                    }
                    if i == 0 {
                        return self.check_leftmost(storage, right).map(|()| None);
                    }
                    bounds = bounds.child(children, i - 1);
                    r = children[i - 1];
                    level = below;
                }
            }
        }
    }

    /// Checks the bounds of every page on the leftmost path below `start`
    /// (a page, its level and bounds), down to its first leaf: a key a
    /// lookup found absent lies just before that leaf's first key, and is
    /// absent only if no page on the way holds keys below its bound.
    fn check_leftmost(&self, storage: &dyn Storage, start: Option<(ChildRef, u8, Bounds)>) -> Result<()> {
        let Some((mut r, mut level, mut bounds)) = start else { return Ok(()) };
        loop {
            let page = self.load(storage, &r, level)?;
            bounds.check(&page, r.offset)?;
            match &*page {
                Page::Leaf(_) => return Ok(()),
                Page::Branch(children) => {
                    bounds = bounds.child(children, 0);
                    r = children[0];
                    level = child_level(level, r.offset)?;
                }
            }
        }
    }

    /// Walks every page of the tree, bypassing the cache (so that damage
    /// done since a page was cached is seen), and keeps going after a damaged
    /// page: `page` is called with each intact page's offset, `entry` with
    /// every entry of intact leaves, `problem` with each failure.
    pub(crate) fn walk_checked(
        &self,
        storage: &dyn Storage,
        root: Option<Root>,
        page: &mut dyn FnMut(u64),
        entry: &mut dyn FnMut(&Key, &Entry),
        problem: &mut dyn FnMut(Error),
    ) {
        let Some(root) = root else { return };
        let mut stack =
            vec![(ChildRef { key: Key { layer: 0, coords: [0; 8] }, offset: root.offset, crc: root.crc }, root.level, Bounds::ROOT)];
        let ps = u64::from(self.page_size);
        let mut buf = vec![0u8; self.page_size as usize];
        let mut seen = HashSet::new();
        while let Some((r, level, bounds)) = stack.pop() {
            if let Err(e) = first_visit(&mut seen, r.offset) {
                problem(e);
                continue;
            }
            if r.offset.checked_add(ps).is_none_or(|end| end > self.limit) {
                problem(Error::corrupt(
                    "index page",
                    0,
                    r.offset,
                    format!("page lies beyond the committed end of the file ({:#x})", self.limit),
                ));
                continue;
            }
            let decoded = storage
                .read_at(r.offset, &mut buf)
                .map_err(|e| Error::io(format!("reading index page at offset {:#x}", r.offset), e))
                .and_then(|()| decode_page(&buf, r.offset, level, Some(r.crc)))
                .and_then(|p| bounds.check(&p, r.offset).map(|()| p));
            match decoded {
                Err(e) => problem(e),
                Ok(Page::Leaf(entries)) => {
                    page(r.offset);
                    entries.iter().for_each(|(k, e)| entry(k, e));
                }
                Ok(Page::Branch(children)) => {
                    page(r.offset);
                    // Levels strictly decrease, so the walk ends; reversed to visit in key order.
                    stack.extend((0..children.len()).rev().map(|i| (children[i], level - 1, bounds.child(&children, i))));
                }
            }
        }
    }

    /// Calls `f` for every entry of the tree in key order.
    pub(crate) fn for_each(&self, storage: &dyn Storage, root: Option<Root>, f: &mut dyn FnMut(&Key, &Entry) -> Result<()>) -> Result<()> {
        self.for_each_in(storage, root, 0..=u32::MAX, f)
    }

    /// Calls `f` for every entry whose layer is in `layers`, in key order,
    /// reading only the pages that can hold such keys.
    pub(crate) fn for_each_in(
        &self,
        storage: &dyn Storage,
        root: Option<Root>,
        layers: std::ops::RangeInclusive<u32>,
        f: &mut dyn FnMut(&Key, &Entry) -> Result<()>,
    ) -> Result<()> {
        type Visit<'a> = &'a mut dyn FnMut(&Key, &Entry) -> Result<()>;
        struct Walk<'a> {
            pr: &'a PageReader,
            s: &'a dyn Storage,
            layers: std::ops::RangeInclusive<u32>,
            seen: HashSet<u64>,
        }
        fn walk(w: &mut Walk<'_>, r: &ChildRef, level: u8, bounds: Bounds, f: Visit<'_>) -> Result<()> {
            first_visit(&mut w.seen, r.offset)?;
            let page = w.pr.load(w.s, r, level)?;
            bounds.check(&page, r.offset)?;
            match &*page {
                Page::Leaf(entries) => entries.iter().filter(|(k, _)| w.layers.contains(&k.layer)).try_for_each(|(k, e)| f(k, e)),
                Page::Branch(children) => {
                    let below = child_level(level, r.offset)?;
                    for (i, c) in children.iter().enumerate() {
                        // Child i holds keys from its own key up to the next child's.
                        let past = c.key.layer > *w.layers.end();
                        let before = children.get(i + 1).is_some_and(|n| n.key.layer < *w.layers.start());
                        if past {
                            break;
                        }
                        if !before {
                            walk(w, c, below, bounds.child(children, i), f)?;
                        }
                    }
                    Ok(())
                }
            }
        }
        match root {
            None => Ok(()),
            Some(root) => {
                let r = ChildRef { key: Key { layer: 0, coords: [0; 8] }, offset: root.offset, crc: root.crc };
                walk(&mut Walk { pr: self, s: storage, layers, seen: HashSet::new() }, &r, root.level, Bounds::ROOT, f)
            }
        }
    }
}

/// Records a visit of the page at `offset`. In a tree every page has one
/// parent; a page reached twice means a hostile index shaped as a graph, whose
/// full walk could take exponential time if it were followed.
fn first_visit(seen: &mut HashSet<u64>, offset: u64) -> Result<()> {
    if seen.insert(offset) {
        Ok(())
    } else {
        Err(Error::corrupt("index page", 0, offset, "the page is referenced more than once"))
    }
}

/// The level of a branch page's children. Decoding guarantees a branch has
/// level >= 1; this check keeps that true even if it were not.
fn child_level(level: u8, offset: u64) -> Result<u8> {
    level.checked_sub(1).ok_or_else(|| Error::corrupt("index page", 0, offset, "a leaf-level page has children"))
}

/// The keys a page may hold, from its parent: its own entry's key (the
/// smallest key below it) up to, not including, the next entry's key, or
/// the parent's own upper bound for the last child. The root has none.
#[derive(Clone, Copy)]
struct Bounds {
    low: Option<Key>,
    high: Option<Key>,
}

impl Bounds {
    const ROOT: Bounds = Bounds { low: None, high: None };

    /// The bounds of child `i` of a branch with these bounds.
    fn child(self, children: &[ChildRef], i: usize) -> Bounds {
        Bounds { low: Some(children[i].key), high: children.get(i + 1).map_or(self.high, |n| Some(n.key)) }
    }

    /// Refuses a page holding a key outside the bounds: the search relies on
    /// them, so such a page would hide its chunks from every lookup.
    fn check(self, page: &Page, offset: u64) -> Result<()> {
        let (first, last) = match page {
            Page::Leaf(e) => (e.first().map(|x| x.0), e.last().map(|x| x.0)),
            Page::Branch(c) => (c.first().map(|x| x.key), c.last().map(|x| x.key)),
        };
        let bad = |what: &str, k: Key, b: Key| {
            Error::corrupt(
                "index page",
                0,
                offset,
                format!(
                    "{what} key {} is {} its parent's bound {}",
                    show(&k),
                    if what == "first" { "below" } else { "not below" },
                    show(&b)
                ),
            )
        };
        if let (Some(lo), Some(k)) = (self.low, first) {
            if k < lo {
                return Err(bad("first", k, lo));
            }
        }
        if let (Some(hi), Some(k)) = (self.high, last) {
            if k >= hi {
                return Err(bad("last", k, hi));
            }
        }
        Ok(())
    }
}

/// A key as text: layer and chunk coordinates.
fn show(k: &Key) -> String {
    format!("(layer {:#x}, chunk {:?})", k.layer, k.coords)
}

/// Collects new pages to be appended at the end of the file in one write.
pub(crate) struct PageWriter {
    pub page_size: usize,
    /// Offset of the first byte of `buf` in the file.
    pub base: u64,
    pub buf: Vec<u8>,
}

impl PageWriter {
    fn append(&mut self, page: &[u8]) -> (u64, u32) {
        let offset = self.base + self.buf.len() as u64;
        self.buf.extend_from_slice(page);
        (offset, get_u32(page, page.len() - TRAILER))
    }

    fn write_leaves(&mut self, entries: &[(Key, Entry)]) -> Vec<ChildRef> {
        let cap = leaf_capacity(self.page_size);
        let pages = entries.len().div_ceil(cap);
        split_even(entries.len(), pages)
            .map(|r| {
                let part = &entries[r];
                let page = encode_leaf(part, self.page_size);
                let (offset, crc) = self.append(&page);
                ChildRef { key: part[0].0, offset, crc }
            })
            .collect()
    }

    fn write_branches(&mut self, children: &[ChildRef], level: u8) -> Vec<ChildRef> {
        let cap = branch_capacity(self.page_size);
        let pages = children.len().div_ceil(cap);
        split_even(children.len(), pages)
            .map(|r| {
                let part = &children[r];
                let page = encode_branch(part, level, self.page_size);
                let (offset, crc) = self.append(&page);
                ChildRef { key: part[0].key, offset, crc }
            })
            .collect()
    }
}

/// Splits 0..n into `parts` contiguous ranges whose lengths differ by at most one.
fn split_even(n: usize, parts: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    (0..parts).map(move |i| (i * n / parts)..((i + 1) * n / parts))
}

/// A change to the index: a key's new entry, or `None` to remove the key.
pub(crate) type Change = (Key, Option<Entry>);

/// Merges sorted `changes` into the tree at `root`, writing new pages to `w`
/// (copy-on-write: pages without changes are shared with the old tree).
/// Returns the new root (`None` when no key is left) and the number of keys
/// in the tree after the merge, given `count` before it.
pub(crate) fn merge(
    reader: &PageReader,
    storage: &dyn Storage,
    root: Option<Root>,
    count: u64,
    changes: &[Change],
    w: &mut PageWriter,
) -> Result<(Option<Root>, u64)> {
    let mut count = Count(count);
    let (mut refs, mut level) = match root {
        None => {
            let new: Vec<(Key, Entry)> = changes.iter().filter_map(|(k, e)| e.map(|e| (*k, e))).collect();
            (w.write_leaves(&new), 0)
        }
        Some(_) if changes.is_empty() => return Ok((root, count.0)),
        Some(root) => {
            let r = ChildRef { key: changes[0].0, offset: root.offset, crc: root.crc };
            (merge_node(reader, storage, (&r, root.level, Bounds::ROOT), changes, w, &mut count)?, root.level)
        }
    };
    if root.is_none() {
        count.0 = changes.iter().filter(|(_, e)| e.is_some()).count() as u64;
    }
    // Removals may empty the tree. (They may also leave branches with a
    // single child; the tree stays valid and keeps its height.)
    if refs.is_empty() {
        return Ok((None, 0));
    }
    while refs.len() > 1 {
        if level >= MAX_LEVEL {
            return Err(Error::new(crate::ErrorKind::OutOfRange, "chunk index would exceed its maximum depth"));
        }
        level += 1;
        refs = w.write_branches(&refs, level);
    }
    Ok((Some(Root { offset: refs[0].offset, crc: refs[0].crc, level }), count.0))
}

/// The number of keys in a tree, kept up to date by a merge.
struct Count(u64);

/// Merges `changes` into the page `r` at `level`, whose keys lie in `bounds`.
fn merge_node(
    reader: &PageReader,
    storage: &dyn Storage,
    (r, level, bounds): (&ChildRef, u8, Bounds),
    changes: &[Change],
    w: &mut PageWriter,
    count: &mut Count,
) -> Result<Vec<ChildRef>> {
    let page = reader.load(storage, r, level)?;
    bounds.check(&page, r.offset)?;
    match &*page {
        Page::Leaf(entries) => {
            let mut merged = Vec::with_capacity(entries.len() + changes.len());
            let (mut i, mut j) = (0, 0);
            while i < entries.len() || j < changes.len() {
                let take_change = j < changes.len() && (i >= entries.len() || changes[j].0 <= entries[i].0);
                if take_change {
                    let existed = i < entries.len() && entries[i].0 == changes[j].0;
                    if existed {
                        i += 1; // replaced or removed
                    }
                    match (changes[j].1, existed) {
                        (Some(e), _) => {
                            count.0 += u64::from(!existed);
                            merged.push((changes[j].0, e));
                        }
                        (None, true) => count.0 = count.0.saturating_sub(1),
                        (None, false) => {}
                    }
                    j += 1;
                } else {
                    merged.push(entries[i]);
                    i += 1;
                }
            }
            Ok(w.write_leaves(&merged))
        }
        Page::Branch(children) => {
            let mut out = Vec::with_capacity(children.len() + 1);
            let mut start = 0;
            for (i, child) in children.iter().enumerate() {
                // Keys below children[1] go to child 0, including those below its own first key.
                let end = match children.get(i + 1) {
                    Some(next) => start + changes[start..].partition_point(|(k, _)| *k < next.key),
                    None => changes.len(),
                };
                if start == end {
                    out.push(*child);
                } else {
                    let below = child_level(level, r.offset)?;
                    out.extend(merge_node(reader, storage, (child, below, bounds.child(children, i)), &changes[start..end], w, count)?);
                }
                start = end;
            }
            Ok(w.write_branches(&out, level))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemoryStorage;

    fn key(layer: u32, c: u32) -> Key {
        Key { layer, coords: [c / 1000, c % 1000, 0, 0, 0, 0, 0, 0] }
    }

    fn commit(s: &MemoryStorage, root: Option<Root>, count: u64, changes: &[Change]) -> (Option<Root>, u64) {
        let base = s.len().unwrap();
        let reader = PageReader::new(DEFAULT_PAGE, base);
        let mut w = PageWriter { page_size: DEFAULT_PAGE as usize, base, buf: Vec::new() };
        let out = merge(&reader, s, root, count, changes, &mut w).unwrap();
        s.write_at(base, &w.buf).unwrap();
        out
    }

    #[test]
    fn cow_merges_match_a_btreemap() {
        let s = MemoryStorage::new();
        s.write_at(0, &[0u8; 64]).unwrap();
        let mut model = std::collections::BTreeMap::new();
        let mut root = None;
        let mut count = 0;
        let mut x = 12345u64;
        for round in 0..if cfg!(miri) { 4 } else { 20 } {
            let mut changes = std::collections::BTreeMap::new();
            for _ in 0..(1 + round * 97 % 700) {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let k = key((x >> 60) as u32, ((x >> 20) % 50_000) as u32);
                // Every fifth change removes a key (present or not).
                let e = (x % 5 != 0).then_some(Entry::Constant { value: x.to_le_bytes() });
                changes.insert(k, e);
            }
            // Late rounds remove whole ranges of keys, emptying pages.
            if round >= 15 {
                let gone: Vec<Key> = model.keys().filter(|k: &&Key| k.layer % 2 == round % 2).copied().collect();
                changes.extend(gone.into_iter().map(|k| (k, None)));
            }
            let changes: Vec<_> = changes.into_iter().collect();
            for (k, e) in &changes {
                match e {
                    Some(e) => model.insert(*k, *e),
                    None => model.remove(k),
                };
            }
            let (r, n) = commit(&s, root, count, &changes);
            (root, count) = (r, n);
            assert_eq!(count as usize, model.len());
        }
        let reader = PageReader::new(DEFAULT_PAGE, s.len().unwrap());
        assert!(root.unwrap().level >= if cfg!(miri) { 1 } else { 2 }, "the test should build a tree with branches");
        for (k, e) in &model {
            assert_eq!(reader.lookup(&s, root, k).unwrap(), Some(*e));
        }
        assert_eq!(reader.lookup(&s, root, &key(99, 1)).unwrap(), None);
        let mut all = Vec::new();
        reader
            .for_each(&s, root, &mut |k, e| {
                all.push((*k, *e));
                Ok(())
            })
            .unwrap();
        assert_eq!(all, model.into_iter().collect::<Vec<_>>());
    }

    /// A branch key raised above its child's first key, with the branch
    /// re-sealed: the page order is intact, but the search would no longer
    /// find the keys it hides.
    #[test]
    fn a_branch_key_above_its_childs_keys_is_corrupt() {
        let s = MemoryStorage::new();
        s.write_at(0, &[0u8; 64]).unwrap();
        let changes: Vec<_> = (0..2000).map(|c| (key(1, c), Some(Entry::Fill))).collect();
        let (root, _) = commit(&s, None, 0, &changes);
        let root = root.unwrap();
        assert_eq!(root.level, 1, "a root branch over leaves");
        let reader = PageReader::new(DEFAULT_PAGE, s.len().unwrap());
        let Page::Branch(mut children) =
            reader.load(&s, &ChildRef { key: key(0, 0), offset: root.offset, crc: root.crc }, 1).unwrap().as_ref().clone()
        else {
            panic!("the root is a branch")
        };
        let Page::Leaf(leaf) = reader.load(&s, &children[1], 0).unwrap().as_ref().clone() else { panic!("a leaf") };
        let hidden = leaf[0].0;
        children[1].key = leaf[1].0;
        let page = encode_branch(&children, 1, DEFAULT_PAGE as usize);
        s.write_at(root.offset, &page).unwrap();
        let root = Some(Root { crc: get_u32(&page, page.len() - TRAILER), ..root });
        let reader = PageReader::new(DEFAULT_PAGE, s.len().unwrap());
        // Lookups of the hidden key and of a key the leaf still shows: each
        // passes by the page and reports it.
        for k in [hidden, leaf[1].0] {
            let e = reader.lookup(&s, root, &k).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::Corrupt, "{e}");
            assert_eq!(e.location().unwrap().offset, children[1].offset, "{e}");
        }
        assert!(reader.for_each(&s, root, &mut |_, _| Ok(())).is_err());
        let mut problems = Vec::new();
        reader.walk_checked(&s, root, &mut |_| {}, &mut |_, _| {}, &mut |e| problems.push(e));
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].to_string().contains("below its parent's bound"), "{}", problems[0]);
    }

    #[test]
    fn removing_every_key_empties_the_tree() {
        let s = MemoryStorage::new();
        s.write_at(0, &[0u8; 64]).unwrap();
        let changes: Vec<_> = (0..5000).map(|c| (key(1, c), Some(Entry::Fill))).collect();
        let (root, n) = commit(&s, None, 0, &changes);
        assert_eq!(n, 5000);
        assert!(root.unwrap().level >= 1);
        // Removing all but one key keeps a valid tree with that key.
        let gone: Vec<_> = (0..5000).filter(|&c| c != 4321).map(|c| (key(1, c), None)).collect();
        let (root2, n) = commit(&s, root, 5000, &gone);
        assert_eq!(n, 1);
        let reader = PageReader::new(DEFAULT_PAGE, s.len().unwrap());
        assert_eq!(reader.lookup(&s, root2, &key(1, 4321)).unwrap(), Some(Entry::Fill));
        assert_eq!(reader.lookup(&s, root2, &key(1, 4320)).unwrap(), None);
        let (root3, n) = commit(&s, root2, 1, &[(key(1, 4321), None)]);
        assert_eq!((root3, n), (None, 0));
    }

    #[test]
    fn damaged_pages_are_reported_with_offsets() {
        let s = MemoryStorage::new();
        s.write_at(0, &[0u8; 64]).unwrap();
        let changes: Vec<_> = (0..500).map(|c| (key(0, c), Some(Entry::Fill))).collect();
        let (root, _) = commit(&s, None, 0, &changes);
        let root = root.unwrap();
        let mut bytes = s.to_bytes();
        bytes[root.offset as usize + 100] ^= 1;
        let bad = MemoryStorage::from_bytes(&bytes);
        let reader = PageReader::new(DEFAULT_PAGE, bytes.len() as u64);
        let e = reader.lookup(&bad, Some(root), &key(0, 3)).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Corrupt);
        assert_eq!(e.location().unwrap().offset, root.offset);
        assert!(e.to_string().contains("CRC32 mismatch"), "{e}");
    }

    /// Chooses 4 bytes at `patch` so that the page's CRC32 equals the value
    /// at `target` (a field inside the checksummed bytes): CRC32 is affine
    /// over GF(2), so the 32 patch bits solve a linear system.
    fn forge_self_crc(page: &mut [u8], target: usize, patch: usize) {
        let body = page.len() - TRAILER;
        let want = get_u32(page, target);
        page[patch..patch + 4].fill(0);
        let base = crc32(&page[..body]);
        // Column i: how flipping patch bit i changes the CRC.
        let mut rows: Vec<(u32, u32)> = (0..32)
            .map(|i| {
                page[patch + i / 8] ^= 1 << (i % 8);
                let d = crc32(&page[..body]) ^ base;
                page[patch + i / 8] ^= 1 << (i % 8);
                (d, 1u32 << i)
            })
            .collect();
        // Gaussian elimination: find patch bits whose CRC effect is want ^ base.
        let mut goal = want ^ base;
        let mut chosen = 0u32;
        for bit in 0..32 {
            let Some(p) = (0..rows.len()).find(|&r| rows[r].0 >> bit & 1 == 1) else { continue };
            let pivot = rows.remove(p);
            for r in rows.iter_mut() {
                if r.0 >> bit & 1 == 1 {
                    *r = (r.0 ^ pivot.0, r.1 ^ pivot.1);
                }
            }
            if goal >> bit & 1 == 1 {
                goal ^= pivot.0;
                chosen ^= pivot.1;
            }
        }
        assert_eq!(goal, 0, "the linear system has a solution");
        put_u32(page, patch, chosen);
        seal(page);
        assert_eq!(get_u32(page, page.len() - TRAILER), want);
    }

    #[test]
    fn a_forged_page_that_is_its_own_child_ends_the_descent() {
        // A level-1 branch whose only child is itself, with its own (forged)
        // CRC recorded as the child's: the parent's CRC check passes, so only
        // the level check stands between the reader and an endless descent.
        let mut page = vec![0u8; DEFAULT_PAGE as usize];
        page[..4].copy_from_slice(MAGIC);
        page[4] = 1;
        put_u16(&mut page, 6, 1);
        put_u64(&mut page, HEADER + 40, 0);
        put_u32(&mut page, HEADER + 36, 0x1234_5678);
        forge_self_crc(&mut page, HEADER + 36, 1000);
        let b = MemoryStorage::new();
        b.write_at(0, &page).unwrap();
        let reader = PageReader::new(DEFAULT_PAGE, DEFAULT_PAGE as u64);
        let root = Some(Root { offset: 0, crc: 0x1234_5678, level: 1 });
        for _ in 0..2 {
            // Twice: the second time the page comes from the cache.
            let e = reader.lookup(&b, root, &key(0, 0)).unwrap_err();
            assert_eq!(e.kind(), crate::ErrorKind::Corrupt);
            assert!(e.to_string().contains("level 1 where level 0 was expected"), "{e}");
            assert!(reader.for_each(&b, root, &mut |_, _| Ok(())).is_err());
        }
    }

    #[test]
    fn a_page_pointing_at_itself_is_refused() {
        // A branch at level 1 whose only child is itself: its level check fails.
        let b = MemoryStorage::new();
        let mut page = vec![0u8; DEFAULT_PAGE as usize];
        page[..4].copy_from_slice(MAGIC);
        page[4] = 1;
        put_u16(&mut page, 6, 1);
        put_u64(&mut page, HEADER + 40, 0);
        seal(&mut page);
        let crc = get_u32(&page, page.len() - 4);
        put_u32(&mut page, HEADER + 36, crc);
        seal(&mut page);
        b.write_at(0, &page).unwrap();
        let crc = get_u32(&page, page.len() - 4);
        let reader = PageReader::new(DEFAULT_PAGE, DEFAULT_PAGE as u64);
        let e = reader.lookup(&b, Some(Root { offset: 0, crc, level: 1 }), &key(0, 0)).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Corrupt);
    }
}
