//! Opening (SPEC.md section 9.1): finding the head, choosing the newest
//! intact commit slot and reading its descriptor into a snapshot; a
//! reader's in-memory copy of the first body bytes; writing a new
//! container's first commit.

use super::{layout, Dataset, Durability, SlotPolicy, DEFAULT_CACHE_BYTES, DEFAULT_MEMORY_LIMIT};
use crate::cache::ChunkCache;
use crate::commit::{body_start, build_head, choose_slot, slot_size, CommitSlot};
use crate::error::{invalid, Error, ErrorKind, Result};
use crate::index::PageReader;
use crate::spec::{version_line, Axis, DescriptorJson, Parsed, Variable, FORMAT_MINOR, MAX_DESCRIPTOR_BYTES};
use crate::storage::Storage;
use crate::wire::crc32;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// A new container's descriptor, serialized and read back as a reader will
/// read it, so that one no reader would accept is refused (before any file
/// is touched, when made first).
#[derive(Clone)]
pub(super) struct NewHead {
    json: Vec<u8>,
    parsed: Parsed,
    compact: bool,
}

impl NewHead {
    /// The length of the descriptor's JSON text, and the number of stored
    /// layers of its variables (each a variable in memory): what keeping it costs.
    pub(super) fn size(&self) -> (usize, usize) {
        (self.json.len(), self.parsed.2.iter().map(|v| 1 + v.layers.len()).sum())
    }

    /// `desc` marked for the compact layout if `compact` (SPEC.md 3.4), as
    /// the bytes of the head, read back within `memory_limit`.
    ///
    /// # Errors
    /// `InvalidArgument` when the descriptor would be too large or would
    /// not read back (attributes nested too deeply, among others).
    pub(super) fn new(desc: DescriptorJson, compact: bool, memory_limit: u64) -> Result<NewHead> {
        NewHead::make(desc, compact, memory_limit, false)
    }

    /// [`NewHead::new`] for a descriptor not yet checked by
    /// [`DescriptorJson::validate`], one a builder checks by a file's rules
    /// ([`DescriptorJson::builder_rules_are_a_files`]). Reading it back
    /// checks every rule; only when that fails is it validated as a
    /// builder's, so that the error says what is wrong with the
    /// description, as the builder's own check would. Creating many
    /// containers of one schema then checks their descriptor once (the
    /// parser's memo).
    pub(super) fn unvalidated(desc: DescriptorJson, compact: bool, memory_limit: u64) -> Result<NewHead> {
        debug_assert!(desc.builder_rules_are_a_files());
        NewHead::make(desc, compact, memory_limit, true)
    }

    fn make(mut desc: DescriptorJson, compact: bool, memory_limit: u64, validate_on_error: bool) -> Result<NewHead> {
        layout::mark(&mut desc, compact);
        let json = desc.to_bytes();
        let failed = |e: Error| {
            if validate_on_error {
                desc.validate(ErrorKind::InvalidArgument)?;
            }
            Err(e)
        };
        if let Err(e) = crate::spec::check_size(&json) {
            return failed(invalid(e));
        }
        // Through the parser's memo: files of one schema have the same bytes.
        match DescriptorJson::parse(&json, memory_limit) {
            Ok(parsed) => Ok(NewHead { json, parsed, compact }),
            Err(e) => failed(invalid(format!("the descriptor would not read back: {}", e.message()))),
        }
    }

    /// The descriptor (as read back) and the layout, to change and make anew.
    pub(super) fn into_descriptor(self) -> (DescriptorJson, bool) {
        (Arc::unwrap_or_clone(self.parsed.0), self.compact)
    }
}

impl Dataset {
    /// Writes a new container's first commit into `storage`, whose length
    /// was `old_len` (what lies beyond the new container is cut off at its
    /// first commit, or when it commits nothing, SPEC.md 7.6).
    pub(super) fn initialize(
        storage: Arc<dyn Storage>,
        path: Option<PathBuf>,
        new: NewHead,
        durability: Durability,
        old_len: u64,
    ) -> Result<Dataset> {
        let line1 = version_line();
        let NewHead { json, parsed: (desc, axes, vars, read_only), compact } = new;
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
        // Head and both slots in one write. Commit n lives in slot n % 2
        // (SPEC.md section 4): commit 1 in slot 1, slot 0 empty.
        let mut bytes = head;
        bytes.resize(bytes.len() + slot_size(head_len) as usize, 0);
        bytes.extend_from_slice(&slot.encode());
        storage.write_at(0, &bytes).map_err(io)?;
        // An existing file is written over, not emptied first: its blocks are
        // rewritten in place rather than freed and allocated again, and a
        // file emptied and rewritten is flushed to disk when closed (ext4's
        // auto_da_alloc), which made an overwrite several times slower than
        // a write. The old bytes lie beyond the committed length, where no
        // reader looks, until the first commit writes over them and cuts off
        // the rest (none, when the new container is as long as the old file).
        if durability == Durability::Fsync {
            storage.sync().map_err(io)?;
        }
        // What was just written is known: no need to read it back.
        let snap = Snapshot { line1: line1.len() as u64, commit: slot, desc, axes, vars, read_only };
        let mut ds = Dataset::from_snapshot(storage, path, true, durability, snap);
        ds.overwritten = (old_len > bytes.len() as u64).then_some(old_len);
        Ok(ds)
    }

    /// Reads the head, the newest intact commit slot and the descriptor.
    pub(super) fn load(
        storage: Arc<dyn Storage>,
        path: Option<PathBuf>,
        writable: bool,
        durability: Durability,
        limit: u64,
    ) -> Result<Dataset> {
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

    pub(super) fn from_snapshot(
        storage: Arc<dyn Storage>,
        path: Option<PathBuf>,
        writable: bool,
        durability: Durability,
        snap: Snapshot,
    ) -> Dataset {
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
            overwritten: None,
            commit: snap.commit,
            pending: BTreeMap::new(),
            held: BTreeMap::new(),
            held_bytes: 0,
            held_limit: DEFAULT_CACHE_BYTES as usize,
            dirty: Vec::new(),
            desc_dirty: false,
            desc_bound: None,
            slot_ends: vec![None; nslots],
            policy: SlotPolicy::Fixed(0),
            turn: 0,
            poisoned: false,
            memory_limit: DEFAULT_MEMORY_LIMIT,
            allow_external_paths: false,
            cache: Mutex::new(ChunkCache::new(DEFAULT_CACHE_BYTES as usize)),
            bytes_read: std::sync::atomic::AtomicU64::new(0),
            writing_decoded: false,
            dedup_enabled: true,
            dedup: None,
            fragment: None,
            prefix: None,
            slot_opener: None,
        }
    }

    /// Moves a read-only dataset to the file's newest commit, if another
    /// handle committed since this one opened or last refreshed; until then
    /// it keeps reading its snapshot. Returns whether it moved. A container
    /// created over the same path since (overwriting it) is read from then
    /// on as that container. A writable dataset always sees its own commits
    /// and returns `false`.
    ///
    /// # Errors
    /// As [`Dataset::open`]; on error the dataset keeps its snapshot.
    pub fn refresh(&mut self) -> Result<bool> {
        if self.writable {
            return Ok(false);
        }
        let inner = self.prefix.as_ref().map_or_else(|| self.storage.clone(), |p| p.inner.clone());
        let (snap, first) = Snapshot::read_keeping_prefix(&*inner, self.memory_limit)?;
        if snap.commit == self.commit {
            return Ok(false);
        }
        // The body bytes kept in memory become the new commit's, as read
        // for it: a container created over this path since (overwriting
        // keeps the file, not its bytes) would otherwise be read through
        // the old container's bytes.
        self.prefix = BodyPrefix::new(inner.clone(), first, &snap.commit);
        self.storage = self.prefix.clone().map_or(inner, |p| p as Arc<dyn Storage>);
        if snap.desc.slots.len() != self.desc.slots.len() {
            *self.slot_files.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = vec![None; snap.desc.slots.len()];
            self.slot_ends = vec![None; snap.desc.slots.len()];
        }
        self.desc = snap.desc;
        self.desc_bound = None;
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
}

/// What a reader needs from the file to serve a commit: the newest intact
/// commit slot and its parsed descriptor.
pub(super) struct Snapshot {
    pub(super) line1: u64,
    pub(super) commit: CommitSlot,
    pub(super) desc: Arc<DescriptorJson>,
    pub(super) axes: Arc<Vec<Axis>>,
    pub(super) vars: Arc<Vec<Variable>>,
    pub(super) read_only: bool,
}

impl Snapshot {
    /// Reads the head, the newest intact commit slot and the descriptor,
    /// also returning the file's first bytes as read for this snapshot
    /// (empty when they had to be read again).
    fn read_keeping_prefix(storage: &dyn Storage, limit: u64) -> Result<(Snapshot, Vec<u8>)> {
        let io = |what: &str| {
            let what = what.to_string();
            move |e| Error::io(format!("reading the {what}"), e)
        };
        let (mut file_len, (line1, head_len, first)) = measured_head(storage)?;
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
    pub(super) fn for_slot(storage: &dyn Storage, commit: CommitSlot, line1: u64) -> Result<Snapshot> {
        Snapshot::for_slot_within(storage, commit, line1, DEFAULT_MEMORY_LIMIT)
    }

    /// [`Snapshot::for_slot`], parsing the descriptor within a memory limit.
    pub(super) fn for_slot_within(storage: &dyn Storage, commit: CommitSlot, line1: u64, limit: u64) -> Result<Snapshot> {
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
pub(super) fn read_slots(storage: &dyn Storage, head_len: u64) -> Result<[Result<CommitSlot>; 2]> {
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
    fn gathers_reads(&self) -> bool {
        self.inner.gathers_reads()
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

/// The file's length and [`find_head`]'s result, the length measured again
/// (twice at most) when the file turns out shorter than measured: a
/// writer's first commit cuts off what was left of the longer file its
/// container was written over (SPEC.md 7.6), maybe between the two.
fn measured_head(storage: &dyn Storage) -> Result<(u64, Head)> {
    let mut attempt = 0;
    loop {
        let file_len = storage.len().map_err(|e| Error::io("reading the file length", e))?;
        match find_head(storage, file_len) {
            Err(e) if attempt < 2 && e.io_kind() == Some(std::io::ErrorKind::UnexpectedEof) => attempt += 1,
            head => return head.map(|h| (file_len, h)),
        }
    }
}

/// What [`find_head`] finds: the version line's length, the head's length,
/// and the first bytes of the file it read.
pub(super) type Head = (u64, u64, Vec<u8>);

/// Finds the version line and the head length by scanning for the second
/// newline; also returns the first bytes it read (up to 64 KiB), which
/// usually hold the commit slots too.
pub(super) fn find_head(storage: &dyn Storage, file_len: u64) -> Result<Head> {
    const STEP: u64 = 64 << 10;
    // build_head reserves twice the descriptor plus 1 KiB, rounded up (the
    // compact layout less).
    let limit = file_len.min(2 * MAX_DESCRIPTOR_BYTES + 2 * crate::commit::HEAD_ALIGN);
    let mut newlines = [0u64; 2];
    let mut found = 0;
    // The first read goes straight into `first` (sized to the file when it
    // is small); a longer head is scanned through a second buffer.
    let mut first = vec![0u8; STEP.min(limit) as usize];
    let mut buf = Vec::new();
    let mut pos = 0u64;
    while found < 2 && pos < limit {
        let n = STEP.min(limit - pos) as usize;
        let chunk = if pos == 0 {
            &mut first[..n]
        } else {
            buf.resize(n, 0);
            &mut buf[..n]
        };
        storage.read_at(pos, chunk).map_err(|e| Error::io("reading the head", e))?;
        let mut from = 0;
        while found < 2 {
            let Some(i) = find_newline(&chunk[from..]) else { break };
            newlines[found] = pos + (from + i) as u64;
            found += 1;
            from += i + 1;
        }
        pos += n as u64;
    }
    // The first read (into `first`) was of at least 32 bytes, or of the whole file.
    let first_line = &first[..first.len().min(32)];
    let Some(&nl1) = newlines[..found].first().filter(|&&p| p < 32) else {
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
    let Some(&nl2) = newlines[..found].get(1) else {
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
pub(super) fn read_descriptor(storage: &dyn Storage, commit: &CommitSlot, line1: u64, file_len: u64) -> Result<Vec<u8>> {
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
