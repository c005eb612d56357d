//! zlib-wrapped deflate (RFC 1950) on libdeflate, which compresses and
//! decompresses whole buffers: a chunk is always whole in memory, and on
//! this format's chunks libdeflate inflates 1.4x to 1.7x faster than zlib-rs
//! and deflates faster and smaller at level 1 (bench/RESULTS.md).
//!
//! Each thread keeps one decompressor and one compressor per level it has
//! used, so encoding and decoding allocate nothing beyond their output.

use libdeflate_sys as sys;
use std::cell::RefCell;
use std::ptr::NonNull;

struct Compressor(NonNull<sys::libdeflate_compressor>);

impl Drop for Compressor {
    fn drop(&mut self) {
        // SAFETY: `p` came from libdeflate_alloc_compressor and is freed once, here.
        unsafe { sys::libdeflate_free_compressor(self.0.as_ptr()) }
    }
}

struct Decompressor(NonNull<sys::libdeflate_decompressor>);

impl Drop for Decompressor {
    fn drop(&mut self) {
        // SAFETY: the pointer came from libdeflate_alloc_decompressor and is freed once, here.
        unsafe { sys::libdeflate_free_decompressor(self.0.as_ptr()) }
    }
}

/// One compressor per level (0..=9), each made when first used.
#[derive(Default)]
struct Compressors([Option<Compressor>; 10]);

thread_local! {
    static COMPRESSORS: RefCell<Option<Compressors>> = const { RefCell::new(None) };
    static DECOMPRESSOR: RefCell<Option<Decompressor>> = const { RefCell::new(None) };
}

fn new_decompressor() -> Option<Decompressor> {
    // SAFETY: plain allocation; a null result (out of memory) is handled.
    NonNull::new(unsafe { sys::libdeflate_alloc_decompressor() }).map(Decompressor)
}

/// Compresses `input` at `level` (0..=9) into a zlib stream shorter than
/// `input`, or returns None when it would not be shorter (or libdeflate
/// could not allocate its state): the caller then stores the bytes raw.
pub(super) fn compress_shorter(input: &[u8], level: u8) -> Option<Vec<u8>> {
    if input.len() < 2 {
        return None;
    }
    super::with_context(
        &COMPRESSORS,
        || Some(Compressors::default()),
        |all| {
            let slot = all.0.get_mut(usize::from(level))?;
            if slot.is_none() {
                // SAFETY: plain allocation; a null result (out of memory) is handled.
                let p = unsafe { sys::libdeflate_alloc_compressor(i32::from(level)) };
                *slot = Some(Compressor(NonNull::new(p)?));
            }
            let c = slot.as_ref()?;
            let mut out: Vec<u8> = Vec::with_capacity(input.len() - 1);
            // SAFETY: libdeflate reads `input.len()` bytes of `input` and writes at
            // most `out.capacity()` bytes into `out`'s spare capacity, returning how
            // many (0 when the result does not fit).
            let n = unsafe {
                sys::libdeflate_zlib_compress(c.0.as_ptr(), input.as_ptr().cast(), input.len(), out.as_mut_ptr().cast(), out.capacity())
            };
            if n == 0 || n >= input.len() {
                return None;
            }
            // SAFETY: libdeflate initialized the first `n` <= capacity bytes.
            unsafe { out.set_len(n) };
            Some(out)
        },
    )
    .flatten()
}

/// Inflates a zlib stream into exactly `out.len()` bytes: a stream that ends
/// early, runs long, fails its Adler-32, or has trailing bytes is an error.
/// Output is bounded by `out`, so no input can make this allocate or write more.
pub(super) fn inflate_exact(input: &[u8], out: &mut [u8]) -> Result<(), String> {
    super::with_context(&DECOMPRESSOR, new_decompressor, |d| {
        let (mut used_in, mut used_out) = (0usize, 0usize);
        // SAFETY: libdeflate reads at most `input.len()` bytes of `input`, writes
        // at most `out.len()` bytes into `out`, and stores the counts it used.
        let r = unsafe {
            sys::libdeflate_zlib_decompress_ex(
                d.0.as_ptr(),
                input.as_ptr().cast(),
                input.len(),
                out.as_mut_ptr().cast(),
                out.len(),
                &mut used_in,
                &mut used_out,
            )
        };
        match r {
            sys::libdeflate_result_LIBDEFLATE_SUCCESS => {}
            // libdeflate reads a truncated stream as if zeros followed, so
            // either error can also mean that the stream was cut short.
            sys::libdeflate_result_LIBDEFLATE_INSUFFICIENT_SPACE => {
                return Err(format!(
                    "deflate stream does not decode to the declared {} bytes (it holds more, or is truncated or damaged)",
                    out.len()
                ))
            }
            _ => return Err("deflate stream is truncated or damaged (bad header, block or Adler-32 checksum)".into()),
        }
        if used_out != out.len() {
            return Err(format!("deflate stream holds {used_out} bytes, expected {}", out.len()));
        }
        if used_in != input.len() {
            return Err(format!("{} bytes after the end of the deflate stream", input.len() - used_in));
        }
        Ok(())
    })
    .ok_or("no memory for a deflate decompressor")?
}
