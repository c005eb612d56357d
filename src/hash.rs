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
    let mut h = Xxh64::new();
    h.update(data);
    h.finish()
}

/// The CRC32 and the XXH64 of `data` in one pass over memory (see [`Sums`]).
pub(crate) fn crc32_xxh64(data: &[u8]) -> (u32, u64) {
    let mut sums = Sums::new();
    sums.update(data);
    sums.finish()
}

/// The CRC32 and the XXH64 of bytes handed in pieces, in one pass over
/// memory: both run over each 32 KiB block while it is in cache, where two
/// separate passes over a chunk of megabytes would each read it from memory.
pub(crate) struct Sums {
    crc: crc32fast::Hasher,
    xxh: Xxh64,
}

impl Sums {
    pub(crate) fn new() -> Sums {
        Sums { crc: crc32fast::Hasher::new(), xxh: Xxh64::new() }
    }

    pub(crate) fn update(&mut self, data: &[u8]) {
        for block in data.chunks(BLOCK) {
            self.crc.update(block);
            self.xxh.update(block);
        }
    }

    /// The CRC32 and the XXH64.
    pub(crate) fn finish(self) -> (u32, u64) {
        (self.crc.finalize(), self.xxh.finish())
    }
}

/// Bytes hashed per block by [`Sums`].
const BLOCK: usize = 32 << 10;

/// XXH64 with seed 0 over bytes handed in pieces of any length: equal to
/// [`xxh64`] of the pieces joined, without joining them.
pub(crate) struct Xxh64 {
    lanes: [u64; 4],
    /// The start of a stripe not yet hashed (fewer than 32 bytes).
    pending: [u8; 32],
    pending_len: usize,
    total: u64,
}

impl Xxh64 {
    pub(crate) fn new() -> Xxh64 {
        Xxh64 { lanes: [P1.wrapping_add(P2), P2, 0, 0u64.wrapping_sub(P1)], pending: [0; 32], pending_len: 0, total: 0 }
    }

    /// Hashes whole 32-byte stripes. The four lanes are separate variables,
    /// so that no bounds check sits between their multiplications: 1.4x faster.
    fn stripes(&mut self, data: &[u8]) {
        let [mut v0, mut v1, mut v2, mut v3] = self.lanes;
        for s in data.chunks_exact(32) {
            v0 = round(v0, u64_at(s, 0));
            v1 = round(v1, u64_at(s, 8));
            v2 = round(v2, u64_at(s, 16));
            v3 = round(v3, u64_at(s, 24));
        }
        self.lanes = [v0, v1, v2, v3];
    }

    pub(crate) fn update(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
        if self.pending_len > 0 {
            let take = (32 - self.pending_len).min(data.len());
            self.pending[self.pending_len..self.pending_len + take].copy_from_slice(&data[..take]);
            self.pending_len += take;
            data = &data[take..];
            if self.pending_len < 32 {
                return;
            }
            let stripe = self.pending;
            self.stripes(&stripe);
            self.pending_len = 0;
        }
        let whole = data.len() - data.len() % 32;
        self.stripes(&data[..whole]);
        self.pending[..data.len() - whole].copy_from_slice(&data[whole..]);
        self.pending_len = data.len() - whole;
    }

    pub(crate) fn finish(&self) -> u64 {
        let [v0, v1, v2, v3] = self.lanes;
        let mut h = if self.total >= 32 {
            let mut h = v0.rotate_left(1).wrapping_add(v1.rotate_left(7)).wrapping_add(v2.rotate_left(12)).wrapping_add(v3.rotate_left(18));
            for acc in [v0, v1, v2, v3] {
                h = merge(h, acc);
            }
            h
        } else {
            P5
        };
        h = h.wrapping_add(self.total);
        finish_tail(h, &self.pending[..self.pending_len])
    }
}

/// The last steps of XXH64: the bytes after the last whole stripe, then the avalanche.
fn finish_tail(mut h: u64, rest: &[u8]) -> u64 {
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
    fn pieces_of_any_length_hash_as_the_whole() {
        let d: Vec<u8> = (0..100_003usize).map(|i| (i * 13 + i / 77) as u8).collect();
        let mut state = 12345u64;
        for n in [0usize, 1, 31, 32, 33, 64, 95, 4096, 100_003] {
            for _ in 0..20 {
                let mut h = super::Xxh64::new();
                let mut at = 0;
                while at < n {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let len = ((state >> 33) as usize % 300).min(n - at);
                    h.update(&d[at..at + len]);
                    at += len;
                }
                assert_eq!(h.finish(), super::xxh64(&d[..n]), "{n}");
            }
        }
    }

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
