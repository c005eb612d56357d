//! XXH64 (seed 0), the 64-bit hash of stored chunks (SPEC.md 5.5): fast
//! enough to run on every chunk written, and a published algorithm that
//! any implementation can reproduce.

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;
const P4: u64 = 0x85EB_CA77_C2B2_AE63;
const P5: u64 = 0x27D4_EB2F_1656_67C5;

fn round(acc: u64, input: u64) -> u64 {
    acc.wrapping_add(input.wrapping_mul(P2)).rotate_left(31).wrapping_mul(P1)
}

fn merge(acc: u64, val: u64) -> u64 {
    (acc ^ round(0, val)).wrapping_mul(P1).wrapping_add(P4)
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[i..i + 8]);
    u64::from_le_bytes(x)
}

fn u32_at(b: &[u8], i: usize) -> u64 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[i..i + 4]);
    u64::from(u32::from_le_bytes(x))
}

/// XXH64 of `data` with seed 0.
pub(crate) fn xxh64(data: &[u8]) -> u64 {
    xxh64_visiting(data, |_| {})
}

/// The CRC32 and the XXH64 of `data` in one pass over memory: both run over
/// each 32 KiB block while it is in cache, where two separate passes over a
/// chunk of megabytes would each read it from memory.
pub(crate) fn crc32_xxh64(data: &[u8]) -> (u32, u64) {
    let mut crc = crc32fast::Hasher::new();
    let hash = xxh64_visiting(data, |block| crc.update(block));
    (crc.finalize(), hash)
}

/// Bytes hashed per block by [`xxh64_visiting`] (a multiple of 32).
const BLOCK: usize = 32 << 10;

/// XXH64 of `data` with seed 0, handing `visit` every byte of `data` once,
/// in order, in blocks of at most [`BLOCK`] bytes, each right before it is
/// hashed.
fn xxh64_visiting(data: &[u8], mut visit: impl FnMut(&[u8])) -> u64 {
    let n = data.len();
    let striped = n - n % 32;
    // The four lanes are separate variables over exact 32-byte stripes, so
    // that no bounds check sits between their multiplications: 1.4x faster.
    let mut h = if n >= 32 {
        let (mut v0, mut v1, mut v2, mut v3) = (P1.wrapping_add(P2), P2, 0, 0u64.wrapping_sub(P1));
        for block in data[..striped].chunks(BLOCK) {
            visit(block);
            for s in block.chunks_exact(32) {
                v0 = round(v0, u64_at(s, 0));
                v1 = round(v1, u64_at(s, 8));
                v2 = round(v2, u64_at(s, 16));
                v3 = round(v3, u64_at(s, 24));
            }
        }
        let mut h = v0.rotate_left(1).wrapping_add(v1.rotate_left(7)).wrapping_add(v2.rotate_left(12)).wrapping_add(v3.rotate_left(18));
        for acc in [v0, v1, v2, v3] {
            h = merge(h, acc);
        }
        h
    } else {
        P5
    };
    let rest = &data[striped..];
    visit(rest);
    h = h.wrapping_add(n as u64);
    let mut i = 0;
    while i + 8 <= rest.len() {
        h = (h ^ round(0, u64_at(rest, i))).rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
        i += 8;
    }
    if i + 4 <= rest.len() {
        h = (h ^ u32_at(rest, i).wrapping_mul(P1)).rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
        i += 4;
    }
    for &b in &rest[i..] {
        h = (h ^ u64::from(b).wrapping_mul(P5)).rotate_left(11).wrapping_mul(P1);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^ (h >> 32)
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_pass_equals_two_across_blocks() {
        for n in [0usize, 31, 32, 33, 32767, 32768, 32769, 65536 + 45, 1_000_003] {
            let d: Vec<u8> = (0..n).map(|i| (i * 7 + i / 300) as u8).collect();
            assert_eq!(super::crc32_xxh64(&d), (crc32fast::hash(&d), super::xxh64(&d)), "{n}");
            if n == 1_000_003 {
                // As computed by the single-loop implementation that preceded the blocks.
                assert_eq!(super::xxh64(&d), 0xa0ac_f1bb_76c4_754b);
            }
        }
    }

    #[test]
    fn published_values() {
        // From the reference implementation (python-xxhash, seed 0).
        assert_eq!(super::xxh64(b""), 0xef46_db37_51d8_e999);
        assert_eq!(super::xxh64(b"a"), 0xd24e_c4f1_a98c_6e5b);
        assert_eq!(super::xxh64(b"abc"), 0x44bc_2cf5_ad77_0999);
        assert_eq!(super::xxh64(b"123456789"), 0x8cb8_41db_40e6_ae83);
        let mut long: Vec<u8> = (0..=255u8).cycle().take(768).collect();
        long.extend_from_slice(b"xyz");
        assert_eq!(super::xxh64(&long), 0xe921_a1b4_5bd7_79f8);
    }
}
