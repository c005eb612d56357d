//! Deduplication: a chunk whose stored bytes equal those of a chunk
//! already in the file shares them, after a byte-for-byte comparison.

use super::Dataset;
use crate::error::{Error, Result};
use crate::index::Entry;
use crate::spec::FEATURE_CHUNK_HASHES;
use std::collections::HashMap;

impl Dataset {
    /// A stored chunk of this file with exactly these bytes, if deduplication
    /// is on and there is one. The first call indexes the committed chunks.
    /// `pieces` are the chunk's stored bytes, joined.
    pub(super) fn find_duplicate(&mut self, codec_byte: u8, pieces: &[&[u8]], crc: u32, hash: u64) -> Result<Option<Entry>> {
        if !self.dedup_enabled || hash == 0 {
            return Ok(None);
        }
        if self.dedup.is_none() {
            let mut map = HashMap::new();
            self.reader.for_each(&*self.storage, self.commit.root, &mut |_, e| {
                if let Entry::Stored { codec, length, hash, .. } = *e {
                    if hash != 0 {
                        map.entry((hash, length, codec)).or_insert(*e);
                    }
                }
                Ok(())
            })?;
            for e in self.pending.values().flatten() {
                if let Entry::Stored { codec, length, hash, .. } = *e {
                    if hash != 0 {
                        map.entry((hash, length, codec)).or_insert(*e);
                    }
                }
            }
            self.dedup = Some(map);
        }
        let length: usize = pieces.iter().map(|p| p.len()).sum();
        let Some(&candidate) = self.dedup.as_ref().and_then(|m| m.get(&(hash, length as u32, codec_byte))) else { return Ok(None) };
        let Entry::Stored { slot, offset, length, crc: c, .. } = candidate else { return Ok(None) };
        if c != crc {
            return Ok(None);
        }
        // Trusted only after a byte-for-byte comparison with what is in the file.
        let storage = self.slot_storage(slot)?;
        if self.check_stored_range(&*storage, slot, offset, length)?.is_err() {
            return Ok(None);
        }
        let mut existing = Vec::new();
        self.reserve(&mut existing, length as usize, "a chunk compared for deduplication")?;
        storage.read_at(offset, &mut existing).map_err(|e| Error::io("reading a chunk compared for deduplication", e))?;
        let mut at = 0;
        let same = pieces.iter().all(|p| {
            at += p.len();
            existing.get(at - p.len()..at) == Some(*p)
        });
        Ok((same && at == existing.len()).then_some(candidate))
    }

    /// Whether the file announces the `chunk_hashes` feature: its stored
    /// entries record the XXH64 of their bytes.
    pub(super) fn records_hashes(&self) -> bool {
        self.desc.features.compat.iter().any(|f| f == FEATURE_CHUNK_HASHES)
    }

    /// Whether chunks with identical stored bytes share them (on by default).
    /// Each candidate is compared byte for byte before it is shared. The
    /// first write of a handle with deduplication on walks the index once.
    pub fn set_deduplication(&mut self, on: bool) {
        self.dedup_enabled = on;
        if !on {
            self.dedup = None;
        }
    }
}
