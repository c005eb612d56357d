//! The chunk shape a variable gets when its builder names none, and the
//! block shape inside a compressed chunk (SPEC.md 6.5) likewise.
//!
//! Chunks are slabs contiguous in C order: whole trailing axes, as many as
//! fit in [`DEFAULT_CHUNK_BYTES`], then the next axis cut into the fewest
//! equal parts that fit, then 1 along the leading axes. Writing or reading
//! a whole array is then sequential I/O through chunks that follow each
//! other in the file as they do in memory, and an array of at most
//! [`DEFAULT_CHUNK_BYTES`] is one chunk. A variable that is read in bricks
//! or slices across every axis should ask for its chunk shape.

/// The most bytes a default chunk holds: 4 MiB.
pub const DEFAULT_CHUNK_BYTES: u64 = 4 << 20;

/// The default chunk shape of a variable of `shape` whose elements are
/// `element_size` bytes (SPEC.md 3.1 states the rule):
///
/// ```
/// // 100 x 1000 x 1000 float64: planes cut in two halves of 4 MB.
/// assert_eq!(vds::default_chunk_shape(&[100, 1000, 1000], 8), [1, 500, 1000]);
/// // 512^3 float32: four planes of 1 MiB.
/// assert_eq!(vds::default_chunk_shape(&[512, 512, 512], 4), [4, 512, 512]);
/// // At most 4 MiB in all: one chunk.
/// assert_eq!(vds::default_chunk_shape(&[1000], 8), [1000]);
/// ```
pub fn default_chunk_shape(shape: &[u64], element_size: usize) -> Vec<u64> {
    let mut chunk: Vec<u64> = shape.iter().map(|&n| n.max(1)).collect();
    let mut bytes = element_size.max(1) as u64;
    for d in (0..chunk.len()).rev() {
        let whole = bytes.saturating_mul(chunk[d]);
        if whole <= DEFAULT_CHUNK_BYTES {
            bytes = whole;
            continue;
        }
        // The fewest equal parts of axis d that fit, and 1 along the axes before it.
        let fit = (DEFAULT_CHUNK_BYTES / bytes).max(1);
        let parts = chunk[d].div_ceil(fit);
        chunk[d] = chunk[d].div_ceil(parts);
        for c in &mut chunk[..d] {
            *c = 1;
        }
        break;
    }
    chunk
}

/// A compressed chunk of at least this many bytes (1 MiB: a 64^3 float32
/// brick) is made of blocks unless its builder says otherwise.
pub const DEFAULT_BLOCKS_MIN_CHUNK: u64 = 1 << 20;
/// The most bytes a default block holds: 128 KiB (32^3 float32).
pub const DEFAULT_BLOCK_BYTES: u64 = 128 << 10;

/// The block shape a chunk of shape `chunk` and `element_size`-byte elements
/// is made of when its variable's codec compresses (deflate or zstd) and
/// its builder names no block shape: none below [`DEFAULT_BLOCKS_MIN_CHUNK`];
/// otherwise the chunk's shape with its longest extent (the slowest of
/// equal ones) halved, rounding up, until a block holds at most
/// [`DEFAULT_BLOCK_BYTES`]. bench/RESULTS.md ("Blocks inside bricks") has
/// the measurements behind the sizes: inside a 64^3 float32 brick, 32^3
/// blocks read traces 3x, small boxes 4.5x and slices 2x faster than whole
/// bricks, for 1% (deflate) to 10% (zstd) more bytes and whole-volume
/// reads 1.04x (deflate) to 1.34x (zstd) as long.
///
/// ```
/// assert_eq!(vds::default_block_shape(&[64, 64, 64], 4), Some(vec![32, 32, 32]));
/// assert_eq!(vds::default_block_shape(&[4, 512, 512], 4), Some(vec![4, 64, 128]));
/// // Chunks below 1 MiB stay whole.
/// assert_eq!(vds::default_block_shape(&[32, 32, 32], 8), None);
/// ```
pub fn default_block_shape(chunk: &[u64], element_size: usize) -> Option<Vec<u64>> {
    let size = element_size.max(1) as u64;
    let bytes_of = |shape: &[u64]| shape.iter().fold(size, |b, &c| b.saturating_mul(c));
    if chunk.is_empty() || bytes_of(chunk) < DEFAULT_BLOCKS_MIN_CHUNK {
        return None;
    }
    let mut block: Vec<u64> = chunk.iter().map(|&c| c.max(1)).collect();
    while bytes_of(&block) > DEFAULT_BLOCK_BYTES {
        // The longest extent, the slowest axis among equals; it is above 1
        // since the block holds more than 128 KiB of elements of at most 8 bytes.
        let longest = block.iter().copied().max().unwrap_or(1);
        let Some(d) = block.iter().position(|&c| c == longest).filter(|_| longest > 1) else { break };
        block[d] = block[d].div_ceil(2);
    }
    Some(block)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slabs_fit_and_cover_trailing_axes() {
        assert_eq!(default_chunk_shape(&[1], 8), [1]);
        assert_eq!(default_chunk_shape(&[0], 8), [1]);
        assert_eq!(default_chunk_shape(&[40, 50], 4), [40, 50]);
        assert_eq!(default_chunk_shape(&[100, 1000, 1000], 8), [1, 500, 1000]);
        assert_eq!(default_chunk_shape(&[512, 512, 512], 4), [4, 512, 512]);
        // One axis longer than a chunk: cut into equal parts.
        assert_eq!(default_chunk_shape(&[10_000_000], 8), [500_000]);
        // Extents whose product overflows still give a chunk that fits.
        let c = default_chunk_shape(&[3, u64::MAX], 2);
        assert!(c[0] == 1 && c[1] * 2 <= DEFAULT_CHUNK_BYTES, "{c:?}");
        for (shape, size) in [(vec![7u64, 300, 301, 302], 8usize), (vec![1 << 20, 3], 1), (vec![2, 2, 2, 1 << 22], 4)] {
            let c = default_chunk_shape(&shape, size);
            let bytes: u64 = c.iter().product::<u64>() * size as u64;
            assert!(bytes <= DEFAULT_CHUNK_BYTES, "{shape:?} -> {c:?}");
            // Contiguous: after the first axis with a chunk extent above 1, every axis is whole.
            let first = c.iter().position(|&x| x > 1).unwrap_or(0);
            assert!(c[first + 1..].iter().zip(&shape[first + 1..]).all(|(a, b)| a == b), "{shape:?} -> {c:?}");
        }
    }

    #[test]
    fn default_blocks_fit_and_halve_the_longest_extents() {
        assert_eq!(default_block_shape(&[64, 64, 64], 4).unwrap(), [32, 32, 32]);
        assert_eq!(default_block_shape(&[64, 64, 64], 8).unwrap(), [16, 32, 32]);
        assert_eq!(default_block_shape(&[1, 500, 1000], 8).unwrap(), [1, 125, 125]);
        assert_eq!(default_block_shape(&[524_288], 8).unwrap(), [16_384]);
        assert_eq!(default_block_shape(&[63, 64, 64], 4), None);
        assert_eq!(default_block_shape(&[], 4), None);
        for (chunk, size) in [(vec![7u64, 300, 301, 302], 8usize), (vec![1 << 20, 3], 1), (vec![2, 2, 2, 1 << 22], 4), (vec![1 << 28], 1)] {
            let b = default_block_shape(&chunk, size).unwrap();
            let bytes: u64 = b.iter().product::<u64>() * size as u64;
            assert!(bytes <= DEFAULT_BLOCK_BYTES && bytes * 2 > DEFAULT_BLOCK_BYTES / 4, "{chunk:?} -> {b:?}");
            assert!(b.iter().zip(&chunk).all(|(b, c)| (1..=*c).contains(b)), "{chunk:?} -> {b:?}");
        }
    }
}
