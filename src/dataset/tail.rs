//! The unwritten tail: a writer's newest chunk bytes, appended at the
//! container's end and kept in memory until the next write to the
//! container, so that they reach the file together with it.
//!
//! A small file's chunks and the index pages its commit appends right
//! after them then go out in one system call, and a run of small chunks in
//! one per [`TAIL_BYTES`]. What reaches the file, and in which order, does
//! not change: every other write (the commit slot above all), every sync
//! and every change of length writes the tail first, and reads see it as if
//! it were written. A tail still unwritten when the handle goes was never
//! committed (the commit slot's write would have written it), so it is
//! dropped, as a rollback drops it.

use crate::storage::Storage;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// The most bytes the tail holds; chunks beyond go out at once, the tail in the same call.
pub(super) const TAIL_BYTES: usize = 64 << 10;

/// The container's storage with an unwritten tail in front of it.
pub(super) struct Tail {
    inner: Arc<dyn Storage>,
    tail: Mutex<Unwritten>,
}

/// Bytes that belong at `at` and onwards, not yet written.
struct Unwritten {
    at: u64,
    bytes: Vec<u8>,
}

impl Unwritten {
    fn end(&self) -> u64 {
        self.at + self.bytes.len() as u64
    }
    /// Whether a write at `offset` continues the tail (an empty tail is continued anywhere).
    fn continued_by(&self, offset: u64) -> bool {
        self.bytes.is_empty() || self.end() == offset
    }
}

impl Tail {
    pub(super) fn new(inner: Arc<dyn Storage>) -> Tail {
        Tail { inner, tail: Mutex::new(Unwritten { at: 0, bytes: Vec::new() }) }
    }

    fn lock(&self) -> MutexGuard<'_, Unwritten> {
        self.tail.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends a chunk's `pieces` at `offset`, the container's end: kept
    /// when they continue the tail and it stays within [`TAIL_BYTES`],
    /// else written now (after the tail, in the same call, when they
    /// continue it).
    ///
    /// # Errors
    /// Any I/O error of the write; the tail is then kept.
    pub(super) fn append(&self, offset: u64, pieces: &[&[u8]]) -> io::Result<()> {
        let n: usize = pieces.iter().map(|p| p.len()).sum();
        let mut tail = self.lock();
        if tail.continued_by(offset) && tail.bytes.len() + n <= TAIL_BYTES {
            if tail.bytes.is_empty() {
                tail.at = offset;
            }
            tail.bytes.reserve(n);
            for p in pieces {
                tail.bytes.extend_from_slice(p);
            }
            return Ok(());
        }
        self.write_after(&mut tail, offset, pieces)
    }

    /// Forgets the tail (a rollback: the bytes were never committed).
    pub(super) fn discard(&self) {
        self.lock().bytes.clear();
    }

    /// Writes `pieces` at `offset` with the tail before them: in one call
    /// when they continue it, else the tail first.
    fn write_after(&self, tail: &mut Unwritten, offset: u64, pieces: &[&[u8]]) -> io::Result<()> {
        if !tail.bytes.is_empty() && tail.end() == offset {
            let mut all: Vec<&[u8]> = Vec::with_capacity(pieces.len() + 1);
            all.push(&tail.bytes);
            all.extend_from_slice(pieces);
            self.inner.write_pieces_at(tail.at, &all)?;
        } else {
            self.write_out(tail)?;
            match pieces {
                [one] => self.inner.write_at(offset, one)?,
                _ => self.inner.write_pieces_at(offset, pieces)?,
            }
        }
        tail.bytes.clear();
        Ok(())
    }

    /// Writes the tail, if any.
    fn write_out(&self, tail: &mut Unwritten) -> io::Result<()> {
        if !tail.bytes.is_empty() {
            self.inner.write_at(tail.at, &tail.bytes)?;
            tail.bytes.clear();
        }
        Ok(())
    }
}

impl Storage for Tail {
    fn len(&self) -> io::Result<u64> {
        let end = {
            let tail = self.lock();
            (!tail.bytes.is_empty()).then(|| tail.end())
        };
        Ok(self.inner.len()?.max(end.unwrap_or(0)))
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        // What the tail holds is copied from it; the rest is read from the file.
        let (before, after) = {
            let tail = self.lock();
            let end = offset.saturating_add(buf.len() as u64);
            if tail.bytes.is_empty() || end <= tail.at || offset >= tail.end() {
                (buf.len(), 0)
            } else {
                let before = usize::try_from(tail.at.saturating_sub(offset)).unwrap_or(usize::MAX);
                let from = usize::try_from(offset.max(tail.at) - tail.at).unwrap_or(usize::MAX);
                let n = (buf.len() - before).min(tail.bytes.len() - from);
                buf[before..before + n].copy_from_slice(&tail.bytes[from..from + n]);
                (before, buf.len() - before - n)
            }
        };
        let len = buf.len();
        if before > 0 {
            self.inner.read_at(offset, &mut buf[..before])?;
        }
        if after > 0 {
            self.inner.read_at(offset + (len - after) as u64, &mut buf[len - after..])?;
        }
        Ok(())
    }
    fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> io::Result<()> {
        if self.lock().bytes.is_empty() {
            return self.inner.read_many(reads);
        }
        reads.iter_mut().try_for_each(|(offset, buf)| self.read_at(*offset, buf))
    }
    fn will_read(&self, ranges: &[(u64, u64)]) {
        // Only what lies wholly in the file: a store that fetches ahead must not keep bytes not written yet.
        let at = {
            let tail = self.lock();
            if tail.bytes.is_empty() {
                u64::MAX
            } else {
                tail.at
            }
        };
        if at == u64::MAX {
            return self.inner.will_read(ranges);
        }
        let written: Vec<(u64, u64)> = ranges.iter().copied().filter(|&(offset, len)| offset.saturating_add(len) <= at).collect();
        self.inner.will_read(&written);
    }
    fn gathers_reads(&self) -> bool {
        self.inner.gathers_reads()
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.write_pieces_at(offset, &[data])
    }
    fn write_pieces_at(&self, offset: u64, pieces: &[&[u8]]) -> io::Result<()> {
        let mut tail = self.lock();
        self.write_after(&mut tail, offset, pieces)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.write_out(&mut self.lock())?;
        self.inner.set_len(len)
    }
    fn sync(&self) -> io::Result<()> {
        self.write_out(&mut self.lock())?;
        self.inner.sync()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::MemoryStorage;

    fn bytes(s: &dyn Storage) -> Vec<u8> {
        let mut b = vec![0; usize::try_from(s.len().unwrap()).unwrap()];
        s.read_at(0, &mut b).unwrap();
        b
    }

    #[test]
    fn appended_bytes_are_read_back_before_they_are_written() {
        let file = Arc::new(MemoryStorage::new());
        file.write_at(0, b"head").unwrap();
        let t = Tail::new(file.clone());
        t.append(4, &[b"ab", b"cd"]).unwrap();
        t.append(8, &[b"ef"]).unwrap();
        assert_eq!(file.len().unwrap(), 4, "held, not written");
        assert_eq!(t.len().unwrap(), 10);
        assert_eq!(bytes(&t), b"headabcdef");
        // Reads across the boundary, inside the tail, and reads of the file alone.
        let mut b = [0u8; 5];
        t.read_at(2, &mut b).unwrap();
        assert_eq!(&b, b"adabc");
        let mut b = [0u8; 3];
        t.read_at(5, &mut b).unwrap();
        assert_eq!(&b, b"bcd");
        let mut b = [0u8; 2];
        t.read_at(1, &mut b).unwrap();
        assert_eq!(&b, b"ea");
        let (mut x, mut y) = ([0u8; 2], [0u8; 3]);
        t.read_many(&mut [(0, &mut x[..]), (7, &mut y[..])]).unwrap();
        assert_eq!((&x, &y), (b"he", b"def"));
        assert!(t.read_at(9, &mut [0u8; 2]).is_err(), "past the end is still an error");
    }

    #[test]
    fn a_write_after_the_tail_takes_it_along_and_any_other_write_writes_it_first() {
        let file = Arc::new(MemoryStorage::new());
        file.write_at(0, b"0123").unwrap();
        let t = Tail::new(file.clone());
        t.append(4, &[b"ab"]).unwrap();
        t.write_at(6, b"IDX").unwrap(); // the commit's index pages, after the chunks
        assert_eq!(bytes(&*file), b"0123abIDX");
        t.append(9, &[b"cd"]).unwrap();
        t.write_at(1, b"S").unwrap(); // the commit slot, elsewhere: the tail goes first
        assert_eq!(bytes(&*file), b"0S23abIDXcd");
        t.append(11, &[b"ef"]).unwrap();
        t.sync().unwrap();
        assert_eq!(bytes(&*file), b"0S23abIDXcdef");
        t.append(13, &[b"gh"]).unwrap();
        t.set_len(12).unwrap();
        assert_eq!(bytes(&*file), b"0S23abIDXcde");
        t.append(12, &[b"zz"]).unwrap();
        t.discard();
        assert_eq!(bytes(&t), b"0S23abIDXcde", "a rollback forgets the tail");
    }

    #[test]
    fn the_tail_is_bounded() {
        let file = Arc::new(MemoryStorage::new());
        let t = Tail::new(file.clone());
        let chunk = vec![7u8; TAIL_BYTES / 2 + 1];
        t.append(0, &[&chunk]).unwrap();
        assert_eq!(file.len().unwrap(), 0);
        t.append(chunk.len() as u64, &[&chunk]).unwrap();
        assert_eq!(file.len().unwrap(), 2 * chunk.len() as u64, "both written, in one call");
        // A chunk that does not continue the tail writes it first.
        t.append(10, &[b"x"]).unwrap();
        t.append(2 * chunk.len() as u64 + 5, &[b"y"]).unwrap();
        assert_eq!(bytes(&*file)[10], b'x');
        assert_eq!(t.len().unwrap(), 2 * chunk.len() as u64 + 6);
    }
}
