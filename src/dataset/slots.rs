//! External-file slots with an identity (SPEC.md section 8.1): the header
//! that names a slot file, checking it when the file is first opened, and
//! adding slots to an existing container.

use super::{Dataset, Durability};
use crate::error::{invalid, Error, ErrorKind, Result};
use crate::spec::{check_slot_name, SlotJson};
use crate::storage::{open_regular, FileStorage, Storage};
use crate::wire::{crc32, get_u32, get_u64, put_u32, put_u64};
use serde_json::Map;
use std::fs::{File, OpenOptions as FsOpenOptions};
use std::path::Path;
use std::sync::Arc;

/// Length of the header of a slot file with an identity; its chunks follow.
pub(crate) const SLOT_HEADER: u64 = 32;
const SLOT_MAGIC: &[u8; 8] = b"VDSXSLOT";
/// The kinds of file a header announces: a slot of a container, or a
/// fragment written beside it (section 11).
pub(crate) const KIND_SLOT: u32 = 0;
pub(crate) const KIND_FRAGMENT: u32 = 1;

/// A slot file's header: magic, id, kind, reserved, CRC32 of bytes 0..28.
pub(crate) fn slot_header(id: u64, kind: u32) -> [u8; SLOT_HEADER as usize] {
    let mut h = [0u8; SLOT_HEADER as usize];
    h[..8].copy_from_slice(SLOT_MAGIC);
    put_u64(&mut h, 8, id);
    put_u32(&mut h, 16, kind);
    let crc = crc32(&h[..28]);
    put_u32(&mut h, 28, crc);
    h
}

/// Parses a slot file's header: its id and kind (0 or 1), or what is wrong with it.
pub(crate) fn parse_slot_header(h: &[u8]) -> std::result::Result<(u64, u32), String> {
    if h.len() < SLOT_HEADER as usize || &h[..8] != SLOT_MAGIC {
        return Err("the file does not start with a slot header (\"VDSXSLOT\")".into());
    }
    let crc = crc32(&h[..28]);
    if get_u32(h, 28) != crc {
        return Err(format!("slot header CRC32 mismatch (stored {:#010x}, computed {crc:#010x})", get_u32(h, 28)));
    }
    // A merged fragment stays a slot with its kind 1 header (section 11).
    // Bytes 20..28 are reserved: written as 0, never checked (SPEC.md 0).
    let kind = get_u32(h, 16);
    if kind != KIND_SLOT && kind != KIND_FRAGMENT {
        return Err(format!("slot header kind {kind} (expected 0, a slot, or 1, a fragment)"));
    }
    Ok((get_u64(h, 8), kind))
}

/// The `"id"` member of a slot: 16 lowercase hex digits.
pub(crate) fn id_text(id: u64) -> String {
    format!("{id:016x}")
}

/// A slot's id from its descriptor member, if it has a valid one.
pub(crate) fn id_value(s: &SlotJson) -> Option<u64> {
    s.id.as_deref().filter(|t| t.len() == 16).and_then(|t| u64::from_str_radix(t, 16).ok())
}

/// A random 64-bit id from the operating system (or, failing that, from
/// the clock, the process and a counter).
pub(crate) fn random_id() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most `b.len()` bytes into `b`.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n == 8 {
        return u64::from_le_bytes(b);
    }
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let seed = [t, u64::from(std::process::id()), N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)];
    crate::hash::xxh64(&seed.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())
}

/// Creates a new slot file (failing if `path` exists, unless `overwrite`)
/// holding only its header, and returns its descriptor entry.
pub(crate) fn create_slot_file(path: &Path, name: &str, overwrite: bool, kind: u32) -> Result<(File, SlotJson)> {
    let mut o = FsOpenOptions::new();
    o.read(true).write(true);
    if overwrite {
        o.create(true);
    } else {
        o.create_new(true);
    }
    let file = o.open(path).map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
    let id = random_id();
    let io = |e| Error::io(format!("writing the header of {}", path.display()), e);
    file.set_len(0).map_err(io)?;
    std::os::unix::fs::FileExt::write_all_at(&file, &slot_header(id, kind), 0).map_err(io)?;
    Ok((file, SlotJson { name: name.into(), id: Some(id_text(id)), length: Some(SLOT_HEADER), extra: Map::new() }))
}

impl Dataset {
    /// Checks an external file against its slot's identity, when the slot
    /// has one: the header's magic, CRC32 and id, and a length of at least
    /// what the last commit recorded. `what` names the slot in errors.
    pub(super) fn check_slot_identity(&self, i: usize, file: &dyn Storage, what: &str) -> Result<()> {
        let slot = &self.desc.slots[i];
        let Some(id) = id_value(slot) else { return Ok(()) };
        let refuse = |why: String| Error::corrupt(what.to_string(), (i + 1) as u16, 0, why);
        let len = file.len().map_err(|e| Error::io(format!("reading the length of {what}"), e))?;
        let mut h = [0u8; SLOT_HEADER as usize];
        if len < SLOT_HEADER {
            return Err(refuse(format!("the file is {len} bytes long, too short for a slot header: truncated or not this slot's file")));
        }
        file.read_at(0, &mut h).map_err(|e| Error::io(format!("reading the header of {what}"), e))?;
        let (found, _) = parse_slot_header(&h).map_err(refuse)?;
        if found != id {
            return Err(refuse(format!(
                "the file holds slot id {}, the container expects {}: it belongs to another container or slot",
                id_text(found),
                id_text(id)
            )));
        }
        if let Some(want) = slot.length.filter(|&l| len < l) {
            return Err(refuse(format!("the file is {len} bytes long, but the container's last commit recorded {want}: truncated")));
        }
        Ok(())
    }

    /// Adds an external-file slot to an open container: creates the file
    /// `name` (relative to the container's directory, which must not exist)
    /// with a slot header and a new random id, and returns the slot's
    /// number for [`Dataset::set_slot_policy`]. The slot is part of the
    /// container from the next commit on.
    ///
    /// # Errors
    /// `InvalidArgument` for a name that is not a confined relative path, is
    /// already a slot or is the container; `AlreadyExists`/`Io` from creating
    /// the file; `OutOfRange` past 65535 slots; `ReadOnly`, `Poisoned`.
    pub fn add_external_slot(&mut self, name: &str) -> Result<u16> {
        self.check_writable()?;
        self.check_not_fragment()?;
        check_slot_name(name).map_err(invalid)?;
        if self.desc.slots.iter().any(|s| s.name == name) {
            return Err(invalid(format!("slot name {name:?} is already used")));
        }
        if self.desc.slots.len() >= usize::from(u16::MAX) {
            return Err(Error::new(ErrorKind::OutOfRange, "a container has at most 65535 external-file slots"));
        }
        let path = self.path.clone().ok_or_else(|| invalid("external-file slots need a container on disk"))?;
        let dir = path.parent().map_or_else(|| Path::new(".").to_path_buf(), Path::to_path_buf);
        let slot_path = dir.join(name);
        if slot_path == path {
            return Err(invalid(format!("external-file slot {name:?} is the container itself")));
        }
        self.check_room_for_slots(&[name])?;
        let (file, json) = create_slot_file(&slot_path, name, false, KIND_SLOT)?;
        self.adopt_slot(file, json, &slot_path)
    }

    /// Refuses new slots `names` when the descriptor listing them would not
    /// read back within the memory limit (or the descriptor's size limit),
    /// each entry taken at its longest (an identity and a length of 2**64 - 1).
    pub(super) fn check_room_for_slots(&self, names: &[&str]) -> Result<()> {
        let mut desc = crate::spec::DescriptorJson::clone(&self.desc);
        for name in names {
            desc.slots.push(SlotJson { name: (*name).to_string(), id: Some("0".repeat(16)), length: Some(u64::MAX), extra: Map::new() });
        }
        desc.check_writable(self.memory_limit).map(|_| ()).map_err(|why| invalid(format!("{} external-file slot(s): {why}", names.len())))
    }

    /// Makes an open slot file the container's next slot (from the next commit).
    pub(super) fn adopt_slot(&mut self, file: File, json: SlotJson, path: &Path) -> Result<u16> {
        if self.durability == Durability::Fsync {
            file.sync_all().map_err(|e| Error::io(format!("syncing {}", path.display()), e))?;
            let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            File::open(dir).and_then(|f| f.sync_all()).map_err(|e| Error::io(format!("syncing directory {}", dir.display()), e))?;
        }
        let len = file.metadata().map_err(|e| Error::io(format!("reading the length of {}", path.display()), e))?.len();
        let storage: std::sync::Arc<dyn crate::storage::Storage> = std::sync::Arc::new(crate::storage::FileStorage::new(file));
        self.desc_mut().slots.push(json);
        self.slot_files.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(Some(storage));
        self.slot_ends.push(Some(len));
        self.desc_dirty = true;
        Ok(self.desc.slots.len() as u16)
    }
}

impl Dataset {
    /// The storage of file slot `slot` (0 = the container).
    pub(super) fn slot_storage(&self, slot: u16) -> Result<Arc<dyn Storage>> {
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
        // Its length is asked when needed, not kept from now: the file may
        // grow before (another writer's commits) and a slot without an id is
        // not measured at once.
        let (file, _) = open_regular(&p, FsOpenOptions::new().read(true).write(self.writable))
            .map_err(|e| Error::io(format!("opening external file slot {slot} ({})", p.display()), e))?;
        let s: Arc<dyn Storage> = Arc::new(FileStorage::new(file));
        self.check_slot_identity(i, &*s, &format!("external file slot {slot} ({})", p.display()))?;
        *entry = Some(s.clone());
        Ok(s)
    }
}
