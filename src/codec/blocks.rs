//! Chunks made of blocks (SPEC.md 6.5, format 1.5): a stored chunk is a
//! block table followed by blocks, each encoded on its own with the
//! variable's codec, so that a read decodes only the blocks it touches.
//! This module owns the block grid of a chunk, the table's bytes, and
//! encoding and decoding whole chunks and single blocks; which blocks a
//! read needs is the read path's business.

use super::{decode, encode_shaped, native_to_le, raw_len};
use crate::array::{block_is_constant, copy_block, fill_block, strides, Order, Span};
use crate::spec::{Codec, DType};
use crate::wire::{crc32, get_u32, put_u32};

/// The codec byte of a chunk made of blocks (bit 5; bits 0-4 zero).
pub(crate) const CODEC_BLOCKS: u8 = 0x20;
/// Bytes of one entry of the block table.
pub(crate) const ENTRY_BYTES: usize = 16;
/// The most blocks a chunk may have (a table of at most 1 MiB).
pub(crate) const MAX_BLOCKS: u64 = 65_536;

/// How a chunk is cut into blocks: the block grid, C order, edge blocks
/// clipped to the chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BlockGrid {
    chunk: Vec<usize>,
    block: Vec<usize>,
    grid: Vec<usize>,
    count: usize,
}

impl BlockGrid {
    /// The grid of `block`-shaped blocks in a chunk of shape `chunk`; both
    /// validated by the descriptor (same length, 1 <= block <= chunk, at most
    /// [`MAX_BLOCKS`] blocks).
    pub(crate) fn new(chunk: &[u64], block: &[u64]) -> BlockGrid {
        let chunk: Vec<usize> = chunk.iter().map(|&c| c as usize).collect();
        let block: Vec<usize> = block.iter().zip(&chunk).map(|(&b, &c)| (b as usize).clamp(1, c.max(1))).collect();
        let grid: Vec<usize> = chunk.iter().zip(&block).map(|(&c, &b)| c.div_ceil(b)).collect();
        let count = grid.iter().product();
        BlockGrid { chunk, block, grid, count }
    }

    /// Number of blocks in a chunk.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// Bytes of the block table: the entries and their CRC32.
    pub(crate) fn table_len(&self) -> usize {
        self.count * ENTRY_BYTES + 4
    }

    /// The block shape.
    pub(crate) fn block_shape(&self) -> &[usize] {
        &self.block
    }

    /// Where block `i` starts in the chunk and its (clipped) extent.
    pub(crate) fn block_box(&self, i: usize) -> (Vec<usize>, Vec<usize>) {
        let n = self.grid.len();
        let mut origin = vec![0; n];
        let mut extent = vec![0; n];
        let mut rest = i;
        for d in (0..n).rev() {
            let g = rest % self.grid[d];
            rest /= self.grid[d];
            origin[d] = g * self.block[d];
            extent[d] = self.block[d].min(self.chunk[d] - origin[d]);
        }
        (origin, extent)
    }

    /// The linear index of the block at grid position `pos`.
    pub(crate) fn index_of(&self, pos: &[usize]) -> usize {
        pos.iter().zip(&self.grid).fold(0, |acc, (&p, &g)| acc * g + p)
    }

    /// Spans and first element copying block `i` (C order, its own extent)
    /// out of a chunk in memory form: `src` strides are the chunk's, `dst`
    /// strides the block's.
    fn chunk_to_block(&self, i: usize) -> (Vec<Span>, usize, usize) {
        let (origin, extent) = self.block_box(i);
        let cst = strides(&self.chunk, Order::C);
        let bst = strides(&extent, Order::C);
        let spans = (0..extent.len()).map(|d| Span { count: extent[d], src: cst[d], dst: bst[d] }).collect();
        let first = origin.iter().zip(&cst).map(|(o, s)| o * s).sum();
        (spans, first, extent.iter().product())
    }
}

/// One entry of a block table, with where the block's bytes start after
/// the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Block {
    /// A block whose elements all equal `value` (little-endian, zero-padded): no bytes.
    Constant { value: [u8; 8] },
    /// Encoded bytes at `offset` (from the start of the stored chunk).
    Stored { codec: u8, offset: u64, length: u32, crc: u32 },
}

/// Parses and checks a block table (`table` holds exactly its bytes) of a
/// stored chunk of `stored_len` bytes: its CRC32, every entry's fields,
/// and that the blocks fill the rest of the chunk exactly. `zstd` says
/// whether the file lists the feature `zstd`: without it a zstd block is
/// corrupt, as a zstd chunk is (SPEC.md 6.3, 6.5); `bounded`, whether the
/// variable's codec is the bounded one, whose blocks may be bounded streams.
pub(crate) fn parse_table(
    grid: &BlockGrid,
    dtype: DType,
    table: &[u8],
    stored_len: u64,
    zstd: bool,
    bounded: bool,
) -> Result<Vec<Block>, String> {
    let n = grid.count();
    if table.len() != grid.table_len() {
        return Err(format!("block table is {} bytes, expected {}", table.len(), grid.table_len()));
    }
    let (entries, tail) = table.split_at(n * ENTRY_BYTES);
    let (stored_crc, computed) = (get_u32(tail, 0), crc32(entries));
    if stored_crc != computed {
        return Err(format!("block table CRC32 mismatch (stored {stored_crc:#010x}, computed {computed:#010x})"));
    }
    let esize = dtype.size();
    let mut offset = table.len() as u64;
    let mut blocks = Vec::with_capacity(n);
    for (i, e) in entries.chunks_exact(ENTRY_BYTES).enumerate() {
        let (length, codec) = (get_u32(e, 0), e[4]);
        if e[5..8] != [0, 0, 0] {
            return Err(format!("block {i}: reserved bytes are not zero"));
        }
        if length == 0 {
            if codec != 0 || e[8 + esize..].iter().any(|&b| b != 0) {
                return Err(format!("block {i}: constant block with codec byte {codec:#04x} or stray value bytes"));
            }
            let mut value = [0u8; 8];
            value.copy_from_slice(&e[8..16]);
            blocks.push(Block::Constant { value });
            continue;
        }
        if e[12..16] != [0, 0, 0, 0] {
            return Err(format!("block {i}: reserved bytes are not zero"));
        }
        let raw = raw_len(dtype, grid.chunk_to_block(i).2) as u64;
        if u64::from(length) > raw {
            return Err(format!("block {i}: stored length {length} exceeds its raw length {raw}"));
        }
        // The chunk codecs of 6.3, and in a bounded variable the bounded one (SPEC.md 6.5).
        let block_codec = [0x00, 0x01, 0x11, 0x02, 0x12].contains(&codec) || (bounded && codec == super::CODEC_BOUNDED);
        if !block_codec {
            return Err(format!("block {i}: codec byte {codec:#04x} is not a block codec"));
        }
        if codec & 0x0f == super::CODEC_ZSTD && !zstd {
            return Err(format!("block {i}: codec byte {codec:#04x} (zstd) in a file that does not list the feature \"zstd\""));
        }
        blocks.push(Block::Stored { codec, offset, length, crc: get_u32(e, 8) });
        offset += u64::from(length);
    }
    if offset != stored_len {
        return Err(format!("the blocks end at byte {offset} of a stored chunk of {stored_len} bytes"));
    }
    Ok(blocks)
}

/// Checks a stored block's CRC32 and decodes it into `out` (its memory
/// form: the block's clipped extent in C order).
pub(crate) fn decode_block(dtype: DType, i: usize, block: &Block, bytes: &[u8], out: &mut [u8]) -> Result<(), String> {
    match *block {
        Block::Constant { value } => {
            let mut v = value;
            super::le_to_native(&mut v[..dtype.size()], dtype.size());
            fill_block(&[Span { count: out.len() / dtype.size(), src: 0, dst: 1 }], &v[..dtype.size()], out, 0);
            Ok(())
        }
        Block::Stored { codec, crc, .. } => {
            let computed = crc32(bytes);
            if computed != crc {
                return Err(format!("block {i}: CRC32 mismatch (stored {crc:#010x}, computed {computed:#010x})"));
            }
            decode(dtype, codec, bytes, out).map_err(|e| format!("block {i}: {e}"))
        }
    }
}

/// Encodes a chunk in memory form (`data`) as a block table and blocks; a
/// bounded codec keeps the elements whose bits are in `exact` bit for bit.
pub(crate) fn encode_chunk(dtype: DType, codec: Codec, grid: &BlockGrid, data: &[u8], exact: &[u64]) -> Vec<u8> {
    let esize = dtype.size();
    let mut table = vec![0u8; grid.table_len()];
    let mut body = Vec::new();
    let mut buf = Vec::new();
    for i in 0..grid.count() {
        let (spans, first, elems) = grid.chunk_to_block(i);
        let e = &mut table[i * ENTRY_BYTES..(i + 1) * ENTRY_BYTES];
        if block_is_constant(&spans, esize, data, first) {
            e[8..8 + esize].copy_from_slice(&data[first * esize..(first + 1) * esize]);
            native_to_le(&mut e[8..8 + esize], esize);
            continue;
        }
        buf.clear();
        buf.resize(elems * esize, 0);
        copy_block(&spans, esize, data, first, &mut buf, 0);
        let (codec_byte, bytes) = encode_shaped(dtype, codec, &buf, &grid.block_box(i).1, exact);
        put_u32(e, 0, bytes.len() as u32);
        e[4] = codec_byte;
        put_u32(e, 8, crc32(&bytes));
        body.extend_from_slice(&bytes);
    }
    let n = grid.count() * ENTRY_BYTES;
    let crc = crc32(&table[..n]);
    put_u32(&mut table, n, crc);
    table.extend_from_slice(&body);
    table
}

/// Decodes a whole stored chunk made of blocks into `out` (the chunk's
/// memory form); `zstd` and `bounded` as for [`parse_table`].
pub(crate) fn decode_chunk(dtype: DType, grid: &BlockGrid, stored: &[u8], out: &mut [u8], zstd: bool, bounded: bool) -> Result<(), String> {
    let table_len = grid.table_len();
    if stored.len() < table_len {
        return Err(format!("{} stored bytes cannot hold a block table of {table_len} bytes", stored.len()));
    }
    let blocks = parse_table(grid, dtype, &stored[..table_len], stored.len() as u64, zstd, bounded)?;
    let esize = dtype.size();
    let mut buf = Vec::new();
    for (i, b) in blocks.iter().enumerate() {
        let (spans, first, elems) = grid.chunk_to_block(i);
        buf.clear();
        buf.resize(elems * esize, 0);
        let bytes = match *b {
            Block::Stored { offset, length, .. } => &stored[offset as usize..offset as usize + length as usize],
            Block::Constant { .. } => &[][..],
        };
        decode_block(dtype, i, b, bytes, &mut buf)?;
        let back: Vec<Span> = spans.iter().map(|s| Span { count: s.count, src: s.dst, dst: s.src }).collect();
        copy_block(&back, esize, &buf, 0, out, first);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Compression;

    fn chunk(n: usize) -> Vec<u8> {
        (0..n).flat_map(|i| ((i as f32 * 0.37).sin() * 100.0).to_le_bytes()).collect()
    }

    #[test]
    fn a_chunk_round_trips_through_blocks_with_clipped_edges() {
        let grid = BlockGrid::new(&[10, 7, 9], &[4, 4, 4]);
        assert_eq!(grid.count(), 3 * 2 * 3);
        let mut data = chunk(10 * 7 * 9);
        // One constant block: the first 4x4x4 block all 2.5.
        for a in 0..4 {
            for b in 0..4 {
                for c in 0..4 {
                    let i = (a * 7 + b) * 9 + c;
                    data[i * 4..i * 4 + 4].copy_from_slice(&2.5f32.to_le_bytes());
                }
            }
        }
        for codec in [Codec::NONE, Codec::deflate(6)] {
            let stored = encode_chunk(DType::Float32, codec, &grid, &data, &[]);
            let table = parse_table(&grid, DType::Float32, &stored[..grid.table_len()], stored.len() as u64, true, false).unwrap();
            assert!(matches!(table[0], Block::Constant { .. }));
            assert!(matches!(table[1], Block::Stored { .. }));
            let mut out = vec![0u8; data.len()];
            decode_chunk(DType::Float32, &grid, &stored, &mut out, true, false).unwrap();
            assert_eq!(out, data, "{codec:?}");
        }
    }

    #[test]
    fn damage_anywhere_is_reported_not_decoded() {
        let grid = BlockGrid::new(&[16, 16], &[8, 8]);
        let data = chunk(256);
        let stored =
            encode_chunk(DType::Float32, Codec { compression: Compression::Deflate { level: 1 }, shuffle: true }, &grid, &data, &[]);
        for at in 0..stored.len() {
            let mut bad = stored.clone();
            bad[at] ^= 0x40;
            let mut out = vec![0u8; data.len()];
            assert!(decode_chunk(DType::Float32, &grid, &bad, &mut out, true, false).is_err(), "flipped byte {at} went unnoticed");
        }
        let mut out = vec![0u8; data.len()];
        assert!(decode_chunk(DType::Float32, &grid, &stored[..stored.len() - 1], &mut out, true, false).is_err());
    }

    #[cfg(feature = "zstd")]
    #[test]
    fn a_zstd_block_needs_the_feature_as_a_zstd_chunk_does() {
        let grid = BlockGrid::new(&[16, 16], &[8, 8]);
        // Repetitive, so that every block compresses.
        let data: Vec<u8> = (0..256).flat_map(|i| ((i % 3) as f32).to_le_bytes()).collect();
        let stored = encode_chunk(DType::Float32, Codec::zstd(1), &grid, &data, &[]);
        assert_eq!(stored[4] & 0x0f, 0x02, "block 0 is zstd");
        let mut out = vec![0u8; data.len()];
        decode_chunk(DType::Float32, &grid, &stored, &mut out, true, false).unwrap();
        assert_eq!(out, data);
        let e = decode_chunk(DType::Float32, &grid, &stored, &mut out, false, false).unwrap_err();
        assert!(e.contains("block 0") && e.contains("zstd"), "{e}");
        let e = parse_table(&grid, DType::Float32, &stored[..grid.table_len()], stored.len() as u64, false, false).unwrap_err();
        assert!(e.contains("feature"), "{e}");
    }

    #[test]
    fn every_byte_of_a_constant_entry_is_checked_for_every_type() {
        // A chunk of four constant blocks is its table alone; each byte of
        // an entry is the value (accepted, any bits), or must be zero.
        let grid = BlockGrid::new(&[4, 4], &[2, 2]);
        for &dtype in DType::ALL.iter().filter(|&&d| d != DType::Bool) {
            let esize = dtype.size();
            let data: Vec<u8> = (0..16).flat_map(|k: u8| vec![(k / 8) * 2 + (k % 4) / 2 + 1; esize]).collect();
            let stored = encode_chunk(dtype, Codec::NONE, &grid, &data, &[]);
            assert_eq!(stored.len(), grid.table_len(), "{dtype}: constant blocks only");
            for at in 0..ENTRY_BYTES {
                let mut bad = stored.clone();
                bad[16 + at] ^= 0x80;
                let n = 4 * ENTRY_BYTES;
                let crc = crc32(&bad[..n]);
                put_u32(&mut bad, n, crc);
                let mut out = vec![0u8; data.len()];
                let got = decode_chunk(dtype, &grid, &bad, &mut out, true, false);
                if (8..8 + esize).contains(&at) {
                    got.unwrap();
                    assert_ne!(out, data, "{dtype}: value byte {at}");
                } else {
                    assert!(got.is_err(), "{dtype}: entry byte {at} went unnoticed");
                }
            }
        }
    }
}
