//! Zstandard (RFC 8878) on libzstd, whole buffers at a time, like deflate:
//! one frame per chunk, no dictionary. Each thread keeps one compression and
//! one decompression context, so encoding and decoding allocate nothing
//! beyond their output once a thread has used them.

use std::cell::RefCell;
use zstd_safe::{CCtx, DCtx};

/// The first four bytes of every zstd frame (RFC 8878 3.1.1), little-endian 0xFD2FB528.
const FRAME_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

thread_local! {
    static COMPRESSOR: RefCell<Option<CCtx<'static>>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<DCtx<'static>>> = const { RefCell::new(None) };
}

/// Compresses `input` at `level` (1..=22) into one zstd frame shorter than
/// `input`, or returns None when it would not be shorter (or libzstd could
/// not allocate its state): the caller then stores the bytes raw.
pub(super) fn compress_shorter(input: &[u8], level: u8) -> Option<Vec<u8>> {
    if input.len() < 2 {
        return None;
    }
    COMPRESSOR.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.is_none() {
            *cell = Some(CCtx::try_create()?);
        }
        let c = cell.as_mut()?;
        let mut out: Vec<u8> = Vec::with_capacity(input.len() - 1);
        // Fails (dstSize_tooSmall) when the frame would not fit, that is, not be shorter.
        let n = c.compress(&mut out, input, i32::from(level)).ok()?;
        (n < input.len()).then_some(out)
    })
}

/// Decodes one zstd frame into exactly `out.len()` bytes. Anything but a
/// single frame that fills `out` exactly is an error: a skippable or legacy
/// frame, a frame that needs a dictionary, more than one frame, trailing
/// bytes, a frame that holds more or fewer bytes, a failed content checksum.
/// Output is bounded by `out`, so no input can make this allocate or write more.
pub(super) fn decompress_exact(input: &[u8], out: &mut [u8]) -> Result<(), String> {
    if input.get(..4) != Some(&FRAME_MAGIC[..]) {
        return Err("not a zstd frame (bad magic number)".into());
    }
    let frame = zstd_safe::find_frame_compressed_size(input)
        .map_err(|e| format!("zstd frame is truncated or damaged ({})", zstd_safe::get_error_name(e)))?;
    if frame != input.len() {
        return Err(format!("{} bytes after the end of the zstd frame", input.len().saturating_sub(frame)));
    }
    if let Some(id) = zstd_safe::get_dict_id_from_frame(input) {
        return Err(format!("zstd frame needs dictionary {id}, and chunks use none"));
    }
    let want = out.len();
    match zstd_safe::get_frame_content_size(input) {
        Ok(Some(n)) if n != want as u64 => return Err(format!("zstd frame holds {n} bytes, expected {want}")),
        Ok(_) => {}
        Err(_) => return Err("zstd frame header is damaged".into()),
    }
    DECOMPRESSOR.with(|cell| {
        let mut cell = cell.borrow_mut();
        if cell.is_none() {
            *cell = Some(DCtx::try_create().ok_or("no memory for a zstd decompressor")?);
        }
        let d = cell.as_mut().ok_or("no zstd decompressor")?;
        let n = d
            .decompress(out, input)
            .map_err(|e| format!("zstd frame does not decode to the declared {want} bytes ({})", zstd_safe::get_error_name(e)))?;
        if n != want {
            return Err(format!("zstd frame holds {n} bytes, expected {want}"));
        }
        Ok(())
    })
}
