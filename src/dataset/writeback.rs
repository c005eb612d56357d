//! The write-back buffer: chunks written in part since the last commit are
//! held decoded in memory, so that a storm of small updates to one chunk
//! reads it once and stores it once. Held chunks are encoded and stored at
//! commit (before the other layers are computed from them), before any
//! operation that walks the index (resizing, compaction, merging, stats
//! count them in place), and whenever the buffer would outgrow its bound;
//! rollback discards them.

use super::plan::{cores, pipeline, PARALLEL_MIN_BYTES};
use super::write::prepare;
use super::Dataset;
use crate::error::Result;
use crate::index::Key;
use crate::spec::Variable;

/// One chunk changed in part since the last commit, decoded.
pub(super) struct Held {
    pub(super) layer: Variable,
    pub(super) coords: Vec<u64>,
    pub(super) data: Vec<u8>,
    /// Its contents may hold approximations already (SPEC.md 6.6): see `prepare`.
    pub(super) lossless: bool,
}

impl Dataset {
    /// The held contents of a chunk, if it is held.
    pub(super) fn held(&self, key: &Key) -> Option<&[u8]> {
        self.held.get(key).map(|h| h.data.as_slice())
    }

    /// Lets `key`'s chunk be held as `data` (its whole decoded contents).
    /// Returns the buffer unused when holding is off or the chunk alone
    /// exceeds the bound; stores the other held chunks first when adding
    /// this one would exceed it. `lossless`: see [`prepare`].
    pub(super) fn hold(&mut self, key: Key, layer: &Variable, coords: &[u64], data: Vec<u8>, lossless: bool) -> Result<Option<Vec<u8>>> {
        if data.len() > self.held_limit {
            return Ok(Some(data));
        }
        if self.held_bytes + data.len() > self.held_limit {
            self.flush_held()?;
        }
        self.held_bytes += data.len();
        self.held.insert(key, Held { layer: layer.clone(), coords: coords.to_vec(), data, lossless });
        Ok(None)
    }

    /// Forgets a held chunk that a write replaces entirely.
    pub(super) fn unhold(&mut self, key: &Key) {
        if let Some(h) = self.held.remove(key) {
            self.held_bytes -= h.data.len();
        }
    }

    /// Encodes (on several cores when there is enough of it) and stores
    /// every held chunk, recording their entries as uncommitted changes.
    /// A failure poisons the dataset: some chunks may be lost.
    pub(crate) fn flush_held(&mut self) -> Result<()> {
        if self.held.is_empty() {
            return Ok(());
        }
        let held: Vec<(Key, Held)> = std::mem::take(&mut self.held).into_iter().collect();
        let bytes = std::mem::take(&mut self.held_bytes);
        let workers = if bytes < PARALLEL_MIN_BYTES { 1 } else { cores().min(held.len()) };
        let result = pipeline(
            held.len(),
            workers,
            || (),
            |(), i| {
                let h = &held[i].1;
                Ok(prepare(&h.layer, &h.coords, &h.data, h.lossless))
            },
            |i, prepared| self.store_chunk(&held[i].1.layer, held[i].0, prepared, &held[i].1.data),
        );
        // Chunks not stored are lost: the uncommitted changes are incomplete.
        self.poisoned |= result.is_err();
        result
    }

    /// Forgets every held chunk (rollback).
    pub(super) fn discard_held(&mut self) {
        self.held.clear();
        self.held_bytes = 0;
    }

    /// Whether there are changes since the last commit: index entries,
    /// held chunks or a changed descriptor.
    pub(super) fn has_uncommitted(&self) -> bool {
        !self.pending.is_empty() || !self.held.is_empty() || self.desc_dirty
    }
}
