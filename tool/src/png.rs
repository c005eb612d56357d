//! A minimal PNG writer: 8-bit RGB, no interlacing, one zlib stream;
//! integers big-endian as PNG (RFC 2083) wants them.

use flate2::write::ZlibEncoder;
use flate2::Compression;
use std::io::Write;

/// Encodes `rgb` (`width * height * 3` bytes, rows top to bottom) as a PNG file.
pub fn encode(width: u32, height: u32, rgb: &[u8]) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]); // 8 bits, RGB, deflate, adaptive filters, no interlace
    chunk(&mut out, b"IHDR", &ihdr);
    // Each row gets filter type 1 (difference from the pixel to the left),
    // which compresses smooth pictures well.
    let stride = width as usize * 3;
    let mut z = ZlibEncoder::new(Vec::new(), Compression::new(6));
    let mut row = Vec::with_capacity(stride + 1);
    for line in rgb.chunks_exact(stride.max(1)).take(height as usize) {
        row.clear();
        row.push(1);
        for (i, &b) in line.iter().enumerate() {
            row.push(if i >= 3 { b.wrapping_sub(line[i - 3]) } else { b });
        }
        // Writing into a Vec cannot fail.
        let _ = z.write_all(&row);
    }
    let data = z.finish().unwrap_or_default();
    chunk(&mut out, b"IDAT", &data);
    chunk(&mut out, b"IEND", &[]);
    out
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let mut h = crc32fast::Hasher::new();
    h.update(kind);
    h.update(data);
    out.extend_from_slice(&h.finalize().to_be_bytes());
}
