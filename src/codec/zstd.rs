//! Zstandard (RFC 8878) on libzstd, whole buffers at a time, like deflate:
//! one frame per chunk, no dictionary. Each thread keeps one compression and
//! one decompression context, so encoding and decoding allocate nothing
//! beyond their output once a thread has used them.

use std::cell::RefCell;
use zstd_safe::{CCtx, DCtx};

/// The first four bytes of every zstd frame (RFC 8878 3.1.1), little-endian 0xFD2FB528.
const FRAME_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
/// The largest block a frame may hold, whatever its window (RFC 8878 3.1.1.2).
const MAX_BLOCK: u64 = 128 << 10;

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
    super::with_context(&COMPRESSOR, CCtx::try_create, |c| {
        let mut out: Vec<u8> = Vec::with_capacity(input.len() - 1);
        // Fails (dstSize_tooSmall) when the frame would not fit, that is, not be shorter.
        let n = c.compress(&mut out, input, i32::from(level)).ok()?;
        (n < input.len()).then_some(out)
    })
    .flatten()
}

/// Decodes one zstd frame into exactly `out.len()` bytes. Anything but a
/// single frame that fills `out` exactly is an error: a skippable or legacy
/// frame, a frame that needs a dictionary, more than one frame, trailing
/// bytes, a block larger than the format allows, a frame that holds more or
/// fewer bytes, a failed content checksum. Output is bounded by `out`, so no
/// input can make this allocate or write more.
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
    check_blocks(input)?;
    let n = super::with_context(&DECOMPRESSOR, DCtx::try_create, |d| {
        d.decompress(out, input)
            .map_err(|e| format!("zstd frame does not decode to the declared {want} bytes ({})", zstd_safe::get_error_name(e)))
    })
    .ok_or("no memory for a zstd decompressor")??;
    if n != want {
        return Err(format!("zstd frame holds {n} bytes, expected {want}"));
    }
    Ok(())
}

/// Checks what libzstd's one-pass decoder does not: that no block is larger
/// than Block_Maximum_Size, min(Window_Size, 128 KiB) (RFC 8878 3.1.1.2).
/// `frame` is one whole frame, as `find_frame_compressed_size` has checked;
/// every read here is bounds-checked anyway.
fn check_blocks(frame: &[u8]) -> Result<(), String> {
    let damaged = || "zstd frame is truncated or damaged (frame header)".to_string();
    let fhd = *frame.get(4).ok_or_else(damaged)?;
    let single_segment = fhd & 0x20 != 0;
    let fcs_len = match fhd >> 6 {
        0 => usize::from(single_segment),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let dict_len = [0, 1, 2, 4][usize::from(fhd & 3)];
    let mut at = 5;
    let window = if single_segment {
        let field = frame.get(5 + dict_len..5 + dict_len + fcs_len).ok_or_else(damaged)?;
        let mut le = [0u8; 8];
        le[..fcs_len].copy_from_slice(field);
        // The 2-byte form stores the size minus 256.
        u64::from_le_bytes(le) + if fcs_len == 2 { 256 } else { 0 }
    } else {
        let wd = *frame.get(5).ok_or_else(damaged)?;
        at += 1;
        let base = 1u64 << (10 + (wd >> 3));
        base + base / 8 * u64::from(wd & 7)
    };
    at += dict_len + fcs_len;
    let max_block = window.min(MAX_BLOCK);
    loop {
        let h = frame.get(at..at + 3).ok_or_else(damaged)?;
        let header = u32::from(h[0]) | u32::from(h[1]) << 8 | u32::from(h[2]) << 16;
        let (last, kind, size) = (header & 1 == 1, (header >> 1) & 3, u64::from(header >> 3));
        if size > max_block {
            return Err(format!("zstd block of {size} bytes exceeds the frame's largest block ({max_block} bytes)"));
        }
        // Raw and compressed blocks carry `size` bytes; an RLE block one byte that repeats `size` times.
        at += 3 + if kind == 1 { 1 } else { size as usize };
        if last {
            return Ok(());
        }
    }
}
