//! The head of a container and its two commit slots (SPEC.md sections 1, 4 and 7).
//!
//! ```text
//! offset      size  content
//! 0           L1    version line "VDS 1.0\n"
//! L1          ..    descriptor JSON, padded with spaces up to byte H-2
//! H-1         1     '\n' (H, the head length, is a multiple of 128)
//! H           S     commit slot 0
//! H+S         S     commit slot 1
//! H+2S        ..    body: chunks, index pages, descriptor copies
//!
//! The aligned layout has H a multiple of 4096 and S = 512; the compact
//! layout (format 1.4, for small containers) any other multiple of 128 and
//! S = 128. H alone says which (SPEC.md 1.1).
//!
//! commit slot (S bytes)
//!   0    8  magic "VDSCOMIT"
//!   8    2  format major
//!   10   2  format minor
//!   12   4  index page size
//!   16   8  sequence number (1 = the creating commit)
//!   24   8  head length H
//!   32   8  committed length of the container file
//!   40   8  descriptor offset
//!   48   8  descriptor length
//!   56   4  descriptor CRC32
//!   60   4  root page CRC32
//!   64   8  root page offset (0 = empty index)
//!   72   1  root level
//!   73   7  reserved, 0
//!   80   8  number of index entries
//!   88  ..  reserved, 0 (420 bytes, or 36 in the compact layout)
//!   S-4  4  CRC32 of bytes [0, S-4)
//! ```
//!
//! Commit `n` is written to slot `n % 2`, so the slot of commit `n - 1` is
//! never touched while commit `n` is in flight: a torn slot write leaves the
//! previous commit readable.

use crate::error::{Error, ErrorKind, Result};
use crate::index::{Root, MAX_LEVEL, MAX_PAGE, MIN_COMPACT_PAGE, MIN_PAGE};
use crate::spec::FORMAT_MAJOR;
use crate::wire::{crc32, get_u16, get_u32, get_u64, put_u16, put_u32, put_u64};

const SLOT_MAGIC: &[u8; 8] = b"VDSCOMIT";
/// Size of one commit slot in the aligned layout.
pub(crate) const SLOT_SIZE: u64 = 512;
/// Size of one commit slot in the compact layout.
pub(crate) const COMPACT_SLOT_SIZE: u64 = 128;
/// The head length of the aligned layout is a multiple of this.
pub(crate) const HEAD_ALIGN: u64 = 4096;
/// The head length of the compact layout is a multiple of this (and not of
/// [`HEAD_ALIGN`]): each slot then lies inside one 512-byte sector.
pub(crate) const COMPACT_ALIGN: u64 = 128;

/// Whether a head of `head_len` bytes is that of the compact layout.
pub(crate) fn is_compact(head_len: u64) -> bool {
    head_len % HEAD_ALIGN != 0
}

/// The size of each commit slot after a head of `head_len` bytes.
pub(crate) fn slot_size(head_len: u64) -> u64 {
    if is_compact(head_len) {
        COMPACT_SLOT_SIZE
    } else {
        SLOT_SIZE
    }
}

/// Where the body starts after a head of `head_len` bytes.
pub(crate) fn body_start(head_len: u64) -> u64 {
    head_len + 2 * slot_size(head_len)
}

/// Where commit `sequence` is written after a head of `head_len` bytes.
pub(crate) fn slot_offset(head_len: u64, sequence: u64) -> u64 {
    head_len + (sequence % 2) * slot_size(head_len)
}

/// The contents of a commit slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CommitSlot {
    pub minor: u16,
    pub page_size: u32,
    pub sequence: u64,
    pub head_len: u64,
    pub file_len: u64,
    pub desc_offset: u64,
    pub desc_len: u64,
    pub desc_crc: u32,
    pub root: Option<Root>,
    pub entries: u64,
}

impl CommitSlot {
    /// The slot's bytes, as many as a slot after its head holds.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let size = slot_size(self.head_len) as usize;
        let mut b = vec![0u8; size];
        b[..8].copy_from_slice(SLOT_MAGIC);
        put_u16(&mut b, 8, FORMAT_MAJOR);
        put_u16(&mut b, 10, self.minor);
        put_u32(&mut b, 12, self.page_size);
        put_u64(&mut b, 16, self.sequence);
        put_u64(&mut b, 24, self.head_len);
        put_u64(&mut b, 32, self.file_len);
        put_u64(&mut b, 40, self.desc_offset);
        put_u64(&mut b, 48, self.desc_len);
        put_u32(&mut b, 56, self.desc_crc);
        if let Some(r) = self.root {
            put_u32(&mut b, 60, r.crc);
            put_u64(&mut b, 64, r.offset);
            b[72] = r.level;
        }
        put_u64(&mut b, 80, self.entries);
        let crc = crc32(&b[..size - 4]);
        put_u32(&mut b, size - 4, crc);
        b
    }

    /// Decodes and checks slot `which` of a file whose head is `head_len`
    /// bytes; `b` holds at least that slot's bytes.
    pub(crate) fn decode(b: &[u8], which: u64, head_len: u64) -> Result<CommitSlot> {
        let size = slot_size(head_len) as usize;
        let offset = head_len + which * size as u64;
        // Named only when something is wrong: opening decodes both slots.
        let object = || format!("commit slot {which}");
        let bad = |detail: String| Error::corrupt(object(), 0, offset, detail);
        let Some(b) = b.get(..size) else {
            return Err(bad(format!("the file ends inside the slot's {size} bytes")));
        };
        let stored = get_u32(b, size - 4);
        let computed = crc32(&b[..size - 4]);
        if stored != computed {
            return Err(bad(format!("CRC32 mismatch (stored {stored:#010x}, computed {computed:#010x})")));
        }
        if &b[..8] != SLOT_MAGIC {
            return Err(bad("bad magic".into()));
        }
        let major = get_u16(b, 8);
        if major != FORMAT_MAJOR {
            return Err(Error::new(
                ErrorKind::UnsupportedVersion,
                format!("{} was written by format version {major}, this library reads {FORMAT_MAJOR}", object()),
            ));
        }
        let page_size = get_u32(b, 12);
        let min_page = if is_compact(head_len) { MIN_COMPACT_PAGE } else { MIN_PAGE };
        if !(min_page..=MAX_PAGE).contains(&page_size) || !page_size.is_power_of_two() {
            return Err(bad(format!("page size {page_size} is not a power of two in {min_page}..={MAX_PAGE}")));
        }
        let s = CommitSlot {
            minor: get_u16(b, 10),
            page_size,
            sequence: get_u64(b, 16),
            head_len: get_u64(b, 24),
            file_len: get_u64(b, 32),
            desc_offset: get_u64(b, 40),
            desc_len: get_u64(b, 48),
            desc_crc: get_u32(b, 56),
            root: match get_u64(b, 64) {
                0 => None,
                offset => Some(Root { offset, crc: get_u32(b, 60), level: b[72] }),
            },
            entries: get_u64(b, 80),
        };
        if s.head_len != head_len {
            return Err(bad(format!("records head length {} but the head is {head_len} bytes", s.head_len)));
        }
        let body = body_start(head_len);
        if s.file_len < body {
            return Err(bad(format!("committed length {} is inside the head", s.file_len)));
        }
        if let Some(r) = s.root {
            if r.level > MAX_LEVEL || r.offset < body || r.offset > s.file_len {
                return Err(bad(format!("index root at offset {:#x}, level {} is out of bounds", r.offset, r.level)));
            }
        }
        if s.sequence == 0 {
            return Err(bad("sequence number 0 is not a commit".into()));
        }
        if s.root.is_none() && s.entries != 0 {
            return Err(bad(format!("{} index entries but no index root", s.entries)));
        }
        Ok(s)
    }
}

/// Builds the head: version line and descriptor padded to a multiple of
/// [`HEAD_ALIGN`], leaving room for the descriptor to double in size; or,
/// for the compact layout, to the next multiple of [`COMPACT_ALIGN`] that
/// is not one of [`HEAD_ALIGN`], leaving 16 bytes and the rounding for the
/// descriptor to grow (a larger descriptor lives in the body, SPEC.md 1).
pub(crate) fn build_head(version_line: &str, descriptor: &[u8], compact: bool) -> Vec<u8> {
    let head_len = if compact {
        let min = version_line.len() as u64 + descriptor.len() as u64 + 1 + 16;
        let h = min.div_ceil(COMPACT_ALIGN) * COMPACT_ALIGN;
        if is_compact(h) {
            h
        } else {
            h + COMPACT_ALIGN
        }
    } else {
        let min = version_line.len() as u64 + 2 * descriptor.len() as u64 + 1024;
        min.div_ceil(HEAD_ALIGN) * HEAD_ALIGN
    };
    let mut head = vec![b' '; head_len as usize];
    head[..version_line.len()].copy_from_slice(version_line.as_bytes());
    head[version_line.len()..version_line.len() + descriptor.len()].copy_from_slice(descriptor);
    head[head_len as usize - 1] = b'\n';
    head
}

/// Picks the newest intact slot. A slot that fails its checks is what a
/// crash during its write leaves, so the other one is used.
pub(crate) fn choose_slot(slots: [Result<CommitSlot>; 2], head_len: u64) -> Result<CommitSlot> {
    match slots {
        [Ok(a), Ok(b)] => Ok(if b.sequence > a.sequence { b } else { a }),
        [Ok(a), Err(_)] => Ok(a),
        [Err(_), Ok(b)] => Ok(b),
        // An unsupported version says more than a corruption report: it says what to do.
        [Err(a), _] if a.kind() == ErrorKind::UnsupportedVersion => Err(a),
        [_, Err(b)] if b.kind() == ErrorKind::UnsupportedVersion => Err(b),
        [Err(a), Err(b)] => Err(Error::corrupt("commit slots", 0, head_len, format!("neither slot is intact ({a}; {b})"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::FORMAT_MINOR;

    #[test]
    fn slot_round_trip_and_damage() {
        let s = CommitSlot {
            minor: FORMAT_MINOR,
            page_size: 4096,
            sequence: 7,
            head_len: 4096,
            file_len: 9000,
            desc_offset: 8,
            desc_len: 100,
            desc_crc: 0xdead_beef,
            root: Some(Root { offset: 6000, crc: 5, level: 1 }),
            entries: 3,
        };
        let b = s.encode();
        assert_eq!(CommitSlot::decode(&b, 1, 4096).unwrap(), s);
        for i in [0, 17, 100, 508] {
            let mut c = b.clone();
            c[i] ^= 0x40;
            let e = CommitSlot::decode(&c, 1, 4096).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::Corrupt);
            assert_eq!(e.location().unwrap().offset, 4096 + 512);
        }
        let newer = CommitSlot { sequence: 8, ..s.clone() };
        assert_eq!(choose_slot([Ok(s.clone()), Ok(newer.clone())], 4096).unwrap().sequence, 8);
        let torn = CommitSlot::decode(&[0u8; 512], 0, 4096);
        assert_eq!(choose_slot([torn, Ok(s.clone())], 4096).unwrap().sequence, 7);
        // The compact layout: 128-byte slots, pages from 256 bytes.
        let c = CommitSlot { head_len: 640, page_size: 256, root: Some(Root { offset: 1000, crc: 5, level: 0 }), ..s };
        let b = c.encode();
        assert_eq!(b.len(), 128);
        assert_eq!(CommitSlot::decode(&b, 0, 640).unwrap(), c);
        let mut d = b.clone();
        d[100] ^= 1;
        assert_eq!(CommitSlot::decode(&d, 1, 640).unwrap_err().location().unwrap().offset, 640 + 128);
        assert!(CommitSlot::decode(&b[..100], 0, 640).is_err());
        let aligned = CommitSlot { head_len: 4096, ..c };
        let e = CommitSlot::decode(&aligned.encode(), 0, 4096).unwrap_err();
        assert!(e.to_string().contains("512..=65536"), "{e}");
    }

    #[test]
    fn head_is_two_lines() {
        for compact in [false, true] {
            let h = build_head("VDS 1.0\n", b"{\"a\":1}", compact);
            assert_eq!(is_compact(h.len() as u64), compact);
            assert_eq!(h.len() as u64 % if compact { COMPACT_ALIGN } else { HEAD_ALIGN }, 0);
            assert_eq!(h.iter().filter(|&&c| c == b'\n').count(), 2);
            assert!(h.starts_with(b"VDS 1.0\n{\"a\":1}   "));
        }
        assert_eq!(build_head("VDS 1.0\n", b"{}", true).len(), 128);
        // A compact head never has the length of an aligned one.
        assert_eq!(build_head("VDS 1.0\n", &[b'x'; 4096 - 8 - 1 - 16], true).len(), 4096 + 128);
    }
}
