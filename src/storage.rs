//! The storage layer: every byte libvds reads or writes goes through [`Storage`].
//!
//! Positional reads and writes only (no shared cursor), so one handle serves
//! many reading threads. Tests put fault-injecting or in-memory layers here.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A random-access byte store: a file, an in-memory buffer, or a test layer over either.
#[allow(clippy::len_without_is_empty)]
pub trait Storage: Send + Sync {
    /// The current length in bytes.
    ///
    /// # Errors
    /// Any I/O error of the underlying store.
    fn len(&self) -> io::Result<u64>;
    /// Fills `buf` from `offset`; reading past the end is an `UnexpectedEof` error.
    ///
    /// # Errors
    /// Any I/O error, or `UnexpectedEof`.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()>;
    /// Fills each buffer from its offset, as [`Storage::read_at`] does for
    /// each in turn (the default). A store where each read waits on a
    /// network (as `remote::RemoteStorage`) fetches them at once instead, merging
    /// neighbouring ranges; libvds calls it for batches of index pages.
    ///
    /// # Errors
    /// As [`Storage::read_at`] for any of the reads; the buffers' contents
    /// are then unspecified.
    fn read_many(&self, reads: &mut [(u64, &mut [u8])]) -> io::Result<()> {
        reads.iter_mut().try_for_each(|(offset, buf)| self.read_at(*offset, buf))
    }
    /// Says that the byte ranges `(offset, length)` are about to be read,
    /// each by one [`Storage::read_at`]. The default does nothing; a store
    /// where each read waits on a network (as `remote::RemoteStorage`) fetches them
    /// at once and serves those reads from memory. libvds announces the
    /// stored chunks a region read needs, up to 32 MiB at a time.
    fn will_read(&self, ranges: &[(u64, u64)]) {
        let _ = ranges;
    }
    /// Whether [`Storage::read_many`] fetches its ranges together, so that
    /// one call costs about what one read does (a store over a network, as
    /// `remote::RemoteStorage`). libvds then finds the index pages of a
    /// region's chunks in batches, a level of the index at a time, before
    /// looking the chunks up one by one. The default is `false`: each page
    /// is read when a lookup needs it.
    fn gathers_reads(&self) -> bool {
        false
    }
    /// Writes all of `data` at `offset`, growing the store if needed.
    ///
    /// # Errors
    /// Any I/O error (including a full disk).
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Writes `pieces` one after another from `offset`, as one
    /// [`Storage::write_at`] of the pieces joined would (the default writes
    /// them in turn; a file writes them with `pwritev`, without joining them).
    ///
    /// # Errors
    /// Any I/O error (including a full disk). Part of the pieces may have been written.
    fn write_pieces_at(&self, offset: u64, pieces: &[&[u8]]) -> io::Result<()> {
        let mut at = offset;
        for p in pieces {
            self.write_at(at, p)?;
            at += p.len() as u64;
        }
        Ok(())
    }
    /// Truncates or extends the store to `len` bytes.
    ///
    /// # Errors
    /// Any I/O error.
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Makes every completed write durable (fsync).
    ///
    /// # Errors
    /// Any I/O error.
    fn sync(&self) -> io::Result<()>;
}

/// Opens `path` with `options` without blocking: a FIFO or a device named
/// by a file (a slot name, say) would otherwise block the open for as long
/// as its other end likes. The file is not checked yet: [`regular`] checks
/// it and turns blocking back on.
///
/// # Errors
/// Any error of the open.
pub(crate) fn open_nonblocking(path: &std::path::Path, options: &mut OpenOptions) -> io::Result<File> {
    options.custom_flags(libc::O_NONBLOCK).open(path)
}

/// Refuses anything but a regular file in `file` (opened from `path` by
/// [`open_nonblocking`]), else returns its metadata with the file back in
/// blocking mode. (A device or FIFO would otherwise block every read.)
///
/// # Errors
/// Any error of `fstat`; `InvalidInput` naming the kind of file when it is
/// not a regular one.
pub(crate) fn regular(file: &File, path: &std::path::Path) -> io::Result<std::fs::Metadata> {
    let meta = file.metadata()?;
    let kind = meta.file_type();
    if !kind.is_file() {
        use std::os::unix::fs::FileTypeExt;
        let what = if kind.is_dir() {
            "a directory"
        } else if kind.is_fifo() {
            "a FIFO"
        } else if kind.is_socket() {
            "a socket"
        } else if kind.is_char_device() {
            "a character device"
        } else if kind.is_block_device() {
            "a block device"
        } else {
            "not a regular file"
        };
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{} is {what}, not a regular file", path.display())));
    }
    // Back to blocking mode (which regular files ignore on Linux, but not
    // everywhere). O_NONBLOCK is the only status flag F_SETFL can change
    // that libvds ever opens a file with (never O_APPEND, O_DIRECT, O_ASYNC
    // or O_NOATIME), so clearing them all needs no F_GETFL first.
    // SAFETY: fcntl on a valid, open descriptor has no memory effects.
    unsafe {
        libc::fcntl(file.as_raw_fd(), libc::F_SETFL, 0);
    }
    Ok(meta)
}

/// [`open_nonblocking`], then [`regular`]: the file and its metadata.
///
/// # Errors
/// As those two.
pub(crate) fn open_regular(path: &std::path::Path, options: &mut OpenOptions) -> io::Result<(File, std::fs::Metadata)> {
    let file = open_nonblocking(path, options)?;
    let meta = regular(&file, path)?;
    Ok((file, meta))
}

/// A store on a local file.
pub struct FileStorage {
    file: File,
    /// The length the opener just read (`UNKNOWN` once used or written
    /// over): the first [`Storage::len`] after opening needs no `fstat`.
    opened_len: AtomicU64,
}

/// No length known: ask the file.
const UNKNOWN: u64 = u64::MAX;

impl FileStorage {
    /// Wraps an open file.
    pub fn new(file: File) -> FileStorage {
        FileStorage { file, opened_len: AtomicU64::new(UNKNOWN) }
    }
    /// Wraps a file whose metadata was read just now (by [`regular`]): the
    /// first call of [`Storage::len`], if no write comes before it,
    /// answers from it.
    pub(crate) fn opened(file: File, meta: &std::fs::Metadata) -> FileStorage {
        FileStorage { file, opened_len: AtomicU64::new(meta.len().min(UNKNOWN - 1)) }
    }
    fn written(&self) {
        self.opened_len.store(UNKNOWN, Ordering::Relaxed);
    }
}

impl Storage for FileStorage {
    fn len(&self) -> io::Result<u64> {
        match self.opened_len.swap(UNKNOWN, Ordering::Relaxed) {
            UNKNOWN => Ok(self.file.metadata()?.len()),
            len => Ok(len),
        }
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.file.read_exact_at(buf, offset)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.written();
        self.file.write_all_at(data, offset)
    }
    fn write_pieces_at(&self, offset: u64, pieces: &[&[u8]]) -> io::Result<()> {
        self.written();
        write_all_vectored_at(&self.file, offset, pieces)
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.written();
        self.file.set_len(len)
    }
    fn sync(&self) -> io::Result<()> {
        self.file.sync_data()
    }
}

/// `pwritev` of every piece, at most `IOV_MAX` (1024) at a time, going on
/// after short writes and interruptions.
fn write_all_vectored_at(file: &File, mut offset: u64, mut pieces: &[&[u8]]) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    const IOV_MAX: usize = 1024;
    // The part of the first piece already written.
    let mut skip = 0usize;
    while let Some(first) = pieces.first() {
        if first.len() == skip {
            (pieces, skip) = (&pieces[1..], 0);
            continue;
        }
        let iov: Vec<libc::iovec> = pieces
            .iter()
            .take(IOV_MAX)
            .enumerate()
            .map(|(i, p)| {
                let p = if i == 0 { &p[skip..] } else { p };
                libc::iovec { iov_base: p.as_ptr() as *mut libc::c_void, iov_len: p.len() }
            })
            .collect();
        let at = libc::off_t::try_from(offset).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "offset beyond off_t"))?;
        // SAFETY: every iovec points into a live slice of `pieces` for the
        // duration of the call, and the kernel only reads from them.
        let n = unsafe { libc::pwritev(file.as_raw_fd(), iov.as_ptr(), iov.len() as libc::c_int, at) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::WriteZero, "pwritev wrote nothing"));
        }
        let mut n = n as usize;
        offset += n as u64;
        // Drop what was written: whole pieces, then part of the next one.
        while let Some(first) = pieces.first() {
            let left = first.len() - skip;
            if n < left {
                skip += n;
                break;
            }
            n -= left;
            skip = 0;
            pieces = &pieces[1..];
        }
    }
    Ok(())
}

/// A store in memory; clones share the same bytes. For tests and scratch datasets.
#[derive(Clone, Default)]
pub struct MemoryStorage {
    bytes: Arc<Mutex<Vec<u8>>>,
}

impl MemoryStorage {
    /// An empty store.
    pub fn new() -> MemoryStorage {
        MemoryStorage::default()
    }
    /// A store holding a copy of `bytes`.
    pub fn from_bytes(bytes: &[u8]) -> MemoryStorage {
        MemoryStorage { bytes: Arc::new(Mutex::new(bytes.to_vec())) }
    }
    /// A copy of the current contents.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.lock().clone()
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        // A panic while holding the lock cannot leave the Vec in an unsafe state.
        self.bytes.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Storage for MemoryStorage {
    fn len(&self) -> io::Result<u64> {
        Ok(self.lock().len() as u64)
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let b = self.lock();
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::UnexpectedEof)?;
        let end = start.checked_add(buf.len()).ok_or(io::ErrorKind::UnexpectedEof)?;
        let src = b.get(start..end).ok_or(io::ErrorKind::UnexpectedEof)?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut b = self.lock();
        let start = usize::try_from(offset).map_err(|_| io::ErrorKind::OutOfMemory)?;
        let end = start.checked_add(data.len()).ok_or(io::ErrorKind::OutOfMemory)?;
        if b.len() < end {
            b.resize(end, 0);
        }
        b[start..end].copy_from_slice(data);
        Ok(())
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        let len = usize::try_from(len).map_err(|_| io::ErrorKind::OutOfMemory)?;
        self.lock().resize(len, 0);
        Ok(())
    }
    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_beyond_one_pwritev_land_in_order() {
        let path = std::env::temp_dir().join(format!("vds-pieces-{}", std::process::id()));
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
        let store = FileStorage::new(file);
        // 3000 pieces (three pwritev calls), empty ones among them, at an offset.
        let data: Vec<Vec<u8>> = (0..3000usize).map(|i| (0..(i * 7) % 53).map(|j| (i + j) as u8).collect()).collect();
        let pieces: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
        store.write_at(0, &[0xEE; 100]).unwrap();
        store.write_pieces_at(100, &pieces).unwrap();
        let joined = data.concat();
        let mut back = vec![0u8; joined.len()];
        store.read_at(100, &mut back).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(back, joined);
        assert_eq!(store.len().unwrap(), 100 + joined.len() as u64);
    }
}
