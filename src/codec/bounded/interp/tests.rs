//! Tests of the interpolation predictors (interp.rs): a decoder written
//! from SPEC.md 6.6.2 to 6.6.4 alone, checked bit for bit against the
//! library's on every form, and hostile streams.

use super::super::tests::{bytes32, bytes64, spec_outlier, spec_value, Rng};
use super::*;

/// A decoder written from SPEC.md 6.6.2 alone: ruzstd, explicit
/// coordinates, the visit order built as a list, runs expanded first.
fn spec_decode(stored: &[u8], esize: usize) -> Vec<f64> {
    use ruzstd::decoding::FrameDecoder;
    let u32_le = |at: usize| u32::from_le_bytes(stored[at..at + 4].try_into().unwrap()) as usize;
    let (w, flags, o) = (usize::from(stored[1]), stored[2], usize::from(stored[3]));
    let t = f64::from_le_bytes(stored[4..12].try_into().unwrap());
    let (k, n, m, rb) = (u32_le(12), [u32_le(16), u32_le(20), u32_le(24)], u32_le(28), u32_le(32));
    let e = n[0] * n[1] * n[2];
    let mut payload = Vec::with_capacity(3 * e * (w + esize) + 64);
    FrameDecoder::new().decode_all_to_vec(&stored[36..], &mut payload).unwrap();
    assert_eq!(payload.len(), rb + m * w + k * esize);
    let plane = |j: usize| (0..w).fold(0u64, |c, b| c | u64::from(payload[rb + b * m + j]) << (8 * b));
    let mut codes: Vec<u64> = Vec::new();
    if flags & 2 == 0 {
        codes.extend((0..m).map(plane));
    } else {
        let mut at = 0;
        let mut run = || {
            let mut ones = 0;
            loop {
                let b = payload[at];
                at += 1;
                ones += usize::from(b);
                if b < 255 {
                    return ones;
                }
            }
        };
        for j in 0..m {
            codes.extend(std::iter::repeat_n(1, run()));
            codes.push(plane(j));
        }
        codes.extend(std::iter::repeat_n(1, run()));
        assert_eq!(at, rb);
    }
    assert_eq!(codes.len(), e);
    // The visit order.
    let order = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]][o];
    // Each element, with the axis and spacing of its pass (none for the
    // first; the extent less one for method 3's corners).
    let anchored = stored[0] >= 3;
    // Method 4's grade (6.6.4); 0 leaves every level at the tolerance.
    let g = if stored[0] == 4 { usize::from(flags >> 2) } else { 0 };
    type Visit = ([usize; 3], Option<(usize, usize)>);
    let mut visits: Vec<Visit> = vec![([0, 0, 0], None)];
    let on_grid = |ax: usize, x: usize, g: usize| x % g == 0 || (anchored && x == n[ax] - 1);
    if anchored {
        for (pass, &d) in order.iter().enumerate() {
            for a in 0..n[0] {
                for b in 0..n[1] {
                    for c in 0..n[2] {
                        let x = [a, b, c];
                        let fits = n[d] > 1
                            && (0..3).all(|ax| {
                                if ax == d {
                                    x[ax] == n[ax] - 1
                                } else if order[..pass].contains(&ax) {
                                    x[ax] == 0 || x[ax] == n[ax] - 1
                                } else {
                                    x[ax] == 0
                                }
                            });
                        if fits {
                            visits.push((x, Some((d, n[d] - 1))));
                        }
                    }
                }
            }
        }
    }
    let big = *n.iter().max().unwrap() - usize::from(anchored);
    let mut levels = 0;
    while (1usize << levels) < big {
        levels += 1;
    }
    // Element 0 and the corners (visits without a spacing, or with the
    // extent less one) are of level `levels`; spacing 2^l, of level l.
    let level_of = |how: Option<(usize, usize)>, x: [usize; 3]| match how {
        Some((_, s)) if !(anchored && s == n[how.unwrap().0] - 1 && x.iter().zip(&n).all(|(&c, &m)| c == 0 || c == m - 1)) => {
            s.trailing_zeros() as usize
        }
        _ => levels,
    };
    for level in (1..=levels).rev() {
        let s = 1usize << (level - 1);
        for (pass, &d) in order.iter().enumerate() {
            for a in 0..n[0] {
                for b in 0..n[1] {
                    for c in 0..n[2] {
                        let x = [a, b, c];
                        let fits = (0..3).all(|ax| {
                            if ax == d {
                                x[ax] % (2 * s) == s && !(anchored && x[ax] == n[ax] - 1)
                            } else if order[..pass].contains(&ax) {
                                on_grid(ax, x[ax], s)
                            } else {
                                on_grid(ax, x[ax], 2 * s)
                            }
                        });
                        if fits {
                            visits.push((x, Some((d, s))));
                        }
                    }
                }
            }
        }
    }
    assert_eq!(visits.len(), e);
    let mut out = vec![f64::NAN; e];
    let mut outliers = payload[rb + m * w..].chunks_exact(esize);
    let at = |x: [usize; 3]| (x[0] * n[1] + x[1]) * n[2] + x[2];
    for (j, (x, how)) in visits.into_iter().enumerate() {
        let t_l = t / (1.0 + (level_of(how, x) * g) as f64 / 16.0).min(2.0);
        let p = match how {
            None => 0.0,
            Some((d, s)) => {
                let v = |delta: isize| {
                    let mut y = x;
                    y[d] = (y[d] as isize + delta * s as isize) as usize;
                    let r = out[at(y)];
                    if r.is_finite() {
                        r
                    } else {
                        0.0
                    }
                };
                let (pos, nd) = (x[d], n[d]);
                // The last sample along d, for method 3.
                let last = || {
                    let mut y = x;
                    y[d] = nd - 1;
                    let r = out[at(y)];
                    if r.is_finite() {
                        r
                    } else {
                        0.0
                    }
                };
                if anchored && s == nd - 1 && pos == s {
                    v(-1)
                } else if anchored && pos + s >= nd {
                    let (sf, dr) = (s as f64, (nd - 1 - pos) as f64);
                    if flags & 1 != 0 && pos >= 3 * s {
                        let l0 = -dr / (2.0 * (3.0 * sf + dr));
                        let l1 = 3.0 * dr / (2.0 * (sf + dr));
                        let l2 = 3.0 * sf * sf / ((dr + 3.0 * sf) * (dr + sf));
                        l0 * v(-3) + l1 * v(-1) + l2 * last()
                    } else {
                        v(-1) + (last() - v(-1)) * (sf / (sf + dr))
                    }
                } else if pos + s >= nd {
                    v(-1)
                } else if flags & 1 == 0 || (pos < 3 * s && pos + 3 * s >= nd) {
                    (v(-1) + v(1)) * 0.5
                } else if pos >= 3 * s && pos + 3 * s < nd {
                    (9.0 * (v(-1) + v(1)) - (v(-3) + v(3))) * 0.0625
                } else if pos < 3 * s {
                    (3.0 * v(-1) + 6.0 * v(1) - v(3)) * 0.125
                } else {
                    (6.0 * v(-1) + 3.0 * v(1) - v(-3)) * 0.125
                }
            }
        };
        let c = codes[j];
        out[at(x)] = if c == 0 { spec_outlier(outliers.next().unwrap()) } else { spec_value(c, p, t_l, esize) };
    }
    assert!(outliers.next().is_none());
    out
}

fn noisy_wave(len: usize, seed: u64) -> Vec<f64> {
    let mut rng = Rng(seed);
    (0..len)
        .map(|i| match rng.next() % 60 {
            0 => f64::NAN,
            1 => f64::NEG_INFINITY,
            2 => 1e200,
            _ => (i as f64 * 0.05).sin() * 100.0 + rng.unit(),
        })
        .collect()
}

/// Every method, order, kind and grade, with and without runs, float32
/// and float64, on shapes with extents that are and are not powers of
/// two: the library's decoder and the one above agree bit for bit.
#[test]
fn a_decoder_from_the_spec_agrees() {
    let v = noisy_wave(6 * 7 * 50, 5);
    for (shape, method) in [[6usize, 7, 50], [1, 42, 50], [1, 1, 2100], [2100, 1, 1], [5, 20, 21], [2, 3, 350], [9, 17, 13]]
        .into_iter()
        .flat_map(|s| [(s, METHOD), (s, METHOD_ANCHORED), (s, METHOD_GRADED)])
    {
        for tol in [5.0, 0.5, 1e-3] {
            for k in 0..6u8 {
                for cubic in [false, true] {
                    // Every grade from 1 to 7 in method 4.
                    let g = if method == METHOD_GRADED { k + 1 + u8::from(cubic) } else { 0 };
                    let form = Form { method, k, cubic, g };
                    let data = bytes64(&v[..shape.iter().product()]);
                    let stored = encode_with::<f64>(&data, shape, form, tol, &[], 3).unwrap();
                    assert_eq!((stored[0], (stored[2] >> 2) & 7), (method, g));
                    let mut back = vec![0u8; data.len()];
                    decode::<f64>(&stored, &mut back).unwrap();
                    let ours: Vec<u64> = back.chunks_exact(8).map(|b| f64::from_ne_bytes(b.try_into().unwrap()).to_bits()).collect();
                    let theirs: Vec<u64> = spec_decode(&stored, 8).iter().map(|x| x.to_bits()).collect();
                    assert_eq!(ours, theirs, "{shape:?}, {form:?}, tolerance {tol}");
                    let v32: Vec<f32> = v[..shape.iter().product()].iter().map(|&x| x as f32).collect();
                    let data = bytes32(&v32);
                    let stored = encode_with::<f32>(&data, shape, form, tol, &[], 3).unwrap();
                    let mut back = vec![0u8; data.len()];
                    decode::<f32>(&stored, &mut back).unwrap();
                    let ours: Vec<u64> =
                        back.chunks_exact(4).map(|b| f64::from(f32::from_ne_bytes(b.try_into().unwrap())).to_bits()).collect();
                    let theirs: Vec<u64> = spec_decode(&stored, 4).iter().map(|x| x.to_bits()).collect();
                    assert_eq!(ours, theirs, "float32 {shape:?}, {form:?}, tolerance {tol}");
                }
            }
        }
    }
}

/// At a loose tolerance most codes are 1 and the stream takes runs; at a
/// tight one, planes. Both kinds are chosen on the data they suit.
#[test]
fn the_encoder_chooses_runs_kind_and_order_by_the_data() {
    let n = [32usize, 32, 32];
    // Smooth along every axis, with a curvature cubic interpolation follows.
    let smooth: Vec<f32> = (0..32 * 32 * 32)
        .map(|i| {
            let (a, b, c) = ((i / 1024) as f32, (i / 32 % 32) as f32, (i % 32) as f32);
            (a * 0.15).sin() * (b * 0.1).cos() + (c * 0.2).sin()
        })
        .collect();
    let loose = encode::<f32>(&bytes32(&smooth), n, METHOD_GRADED, 1e-2, &[], 3).unwrap();
    assert_eq!(loose[2] & RUNS, RUNS, "runs at a loose tolerance");
    let tight = encode::<f32>(&bytes32(&smooth), n, METHOD_GRADED, 1e-6, &[], 3).unwrap();
    assert_eq!(tight[2] & RUNS, 0, "planes at a tight tolerance");
    assert_eq!(tight[2] & CUBIC, CUBIC, "cubic on smooth data at a tight tolerance");
    // Smooth along axes 0 and 1, rough along axis 2: axis 2 goes first,
    // so that the most points are interpolated along the smooth ones.
    let mut rng = Rng(17);
    let trace: Vec<f32> = (0..32).map(|_| rng.unit() as f32 * 100.0).collect();
    let rough: Vec<f32> = (0..32 * 32 * 32).map(|i| ((i / 1024) as f32 * 0.1).sin() * 10.0 + trace[i % 32]).collect();
    let stored = encode::<f32>(&bytes32(&rough), n, METHOD_GRADED, 0.5, &[], 3).unwrap();
    assert_eq!(ORDERS[usize::from(stored[3])][0], 2, "order {:?}", ORDERS[usize::from(stored[3])]);
    // Orders that differ only in axes of extent 1 are tried once.
    assert_eq!(distinct_orders([1, 1, 9]), vec![0]);
    assert_eq!(distinct_orders([1, 4, 9]).len(), 2);
    assert_eq!(distinct_orders([3, 4, 9]).len(), 6);
}

/// The 64^3 chunk at `at` of the benchmark's smooth 512^3 volume.
fn smooth_chunk(at: [usize; 3]) -> Vec<f32> {
    (0..64 * 64 * 64)
        .map(|i| {
            let [x, y, z] = [i / 4096 + at[0], i / 64 % 64 + at[1], i % 64 + at[2]].map(|c| c as f32 / 512.0);
            (6.0 * x + 2.0 * y).sin() * (9.0 * z + 3.0 * x * y).cos() + 0.25 * (17.0 * z).sin()
        })
        .collect()
}

/// The largest difference between `stored` decoded and `v`.
fn worst_error(stored: &[u8], v: &[f32]) -> f64 {
    let mut back = vec![0u8; v.len() * 4];
    decode::<f32>(stored, &mut back).unwrap();
    back.chunks_exact(4)
        .zip(v)
        .map(|(b, &x)| (f64::from(f32::from_ne_bytes(b.try_into().unwrap())) - f64::from(x)).abs())
        .fold(0.0, f64::max)
}

/// On a smooth volume in a chunk of 64^3 (extents a power of two, so
/// that method 2 copies the neighbour before into the last sample of
/// each axis at every level), anchoring the last samples stores the
/// chunk several times smaller, and both decode within the bound.
#[test]
fn anchoring_the_last_samples_shrinks_a_smooth_chunk() {
    let (n, v) = ([64usize, 64, 64], smooth_chunk([0, 0, 0]));
    let data = bytes32(&v);
    for tol in [0.0225, 0.00225] {
        let open = encode::<f32>(&data, n, METHOD, tol, &[], 3).unwrap();
        let anchored = encode::<f32>(&data, n, METHOD_ANCHORED, tol, &[], 3).unwrap();
        assert!(anchored.len() * 3 < open.len(), "tolerance {tol}: {} bytes anchored, {} not", anchored.len(), open.len());
        for stored in [&open, &anchored] {
            assert!(worst_error(stored, &v) <= tol);
        }
    }
}

/// On the same chunk at tight tolerances, finer steps on the coarser
/// levels (method 4) store it markedly smaller than method 3, the
/// encoder picks a grade other than 0 and cubic interpolation, and the
/// values stay within the bound: checked against the tolerance itself,
/// not the finer steps.
#[test]
fn grading_the_coarse_levels_shrinks_a_smooth_chunk() {
    // A chunk whose kind an ungraded corner misjudges at 0.001 of the range.
    let (n, v) = ([64usize, 64, 64], smooth_chunk([0, 64, 0]));
    let data = bytes32(&v);
    for tol in [0.002449, 0.0002449] {
        let anchored = encode::<f32>(&data, n, METHOD_ANCHORED, tol, &[], 3).unwrap();
        let graded = encode::<f32>(&data, n, METHOD_GRADED, tol, &[], 3).unwrap();
        assert_ne!(graded[2] & GRADE, 0, "tolerance {tol}: grade 0");
        // Cubic, which the ungraded corner judges worse than linear.
        assert_eq!(graded[2] & CUBIC, CUBIC, "tolerance {tol}: linear");
        assert!(graded.len() * 5 < anchored.len() * 4, "tolerance {tol}: {} bytes graded, {} not", graded.len(), anchored.len());
        assert!(worst_error(&graded, &v) <= tol);
    }
    // Grade 0 is method 3's stream under another method byte.
    let form = Form { method: METHOD_ANCHORED, k: 2, cubic: true, g: 0 };
    let three = encode_with::<f32>(&data, n, form, 0.0025, &[], 3).unwrap();
    let four = encode_with::<f32>(&data, n, Form { method: METHOD_GRADED, ..form }, 0.0025, &[], 3).unwrap();
    assert_eq!((three[0], four[0]), (METHOD_ANCHORED, METHOD_GRADED));
    assert_eq!(three[1..], four[1..]);
}

#[test]
fn hostile_streams_are_refused() {
    let v: Vec<f32> = (0..4000).map(|i| (i as f32 * 0.1).sin()).collect();
    let data = bytes32(&v);
    for (tol, method) in [0.5, 1e-4].into_iter().flat_map(|t| [(t, METHOD), (t, METHOD_ANCHORED), (t, METHOD_GRADED)]) {
        let stored = encode::<f32>(&data, [10, 20, 20], method, tol, &[], 3).expect("encoded");
        let mut out = vec![0u8; data.len()];
        decode::<f32>(&stored, &mut out).unwrap();
        assert!(decode::<f32>(&stored[..HEADER_LEN - 1], &mut out).is_err());
        assert!(decode::<f32>(&stored[..stored.len() - 1], &mut out).is_err());
        let mut short = vec![0u8; data.len() - 4];
        assert!(decode::<f32>(&stored, &mut short).is_err());
        // A flag beyond the known ones (method 4's grade takes bits 2-4).
        let flag = if method == METHOD_GRADED { 0x20 } else { 4 };
        for (at, value) in [(1, 3u8), (2, flag), (2, 0x81), (3, 6), (11, 0xff), (12, 0xff), (16, 2), (28, 0xff), (31, 0x7f), (33, 0xff)] {
            let mut bad = stored.clone();
            bad[at] = value;
            assert!(decode::<f32>(&bad, &mut out).is_err(), "tolerance {tol}: byte {at} = {value}");
        }
        // Every single-byte change either is refused or decodes without panicking.
        for at in 0..stored.len() {
            let mut bad = stored.clone();
            bad[at] ^= 0x5a;
            let _ = decode::<f32>(&bad, &mut out);
        }
    }
    // Runs that name more elements than the chunk has, made by hand.
    let mut runs = Vec::new();
    push_run(50_000, &mut runs);
    let frame = zstd::compress_shorter(&runs, 3).unwrap();
    let mut bad = vec![METHOD, 1, RUNS, 0];
    bad.extend_from_slice(&0.5f64.to_le_bytes());
    for x in [0u32, 10, 20, 20, 0, runs.len() as u32] {
        bad.extend_from_slice(&x.to_le_bytes());
    }
    bad.extend_from_slice(&frame);
    let mut out = vec![0u8; 4000 * 4];
    assert!(decode::<f32>(&bad, &mut out).unwrap_err().contains("zero runs"));
    // A run left open by the last byte.
    let open = vec![255u8; 40];
    let frame = zstd::compress_shorter(&open, 3).unwrap();
    bad.truncate(HEADER_LEN - 4);
    bad.extend_from_slice(&40u32.to_le_bytes());
    bad.extend_from_slice(&frame);
    assert!(decode::<f32>(&bad, &mut out).unwrap_err().contains("end inside a run"));
    // A later run left open: run 0 of no codes 1, plane code 0, then a
    // run the bytes end inside.
    let mut payload = vec![0u8];
    payload.extend_from_slice(&[255; 40]);
    payload.push(7);
    let frame = zstd::compress_shorter(&payload, 3).unwrap();
    bad.truncate(HEADER_LEN - 8);
    bad.extend_from_slice(&1u32.to_le_bytes());
    bad.extend_from_slice(&41u32.to_le_bytes());
    bad.extend_from_slice(&frame);
    assert!(decode::<f32>(&bad, &mut out).unwrap_err().contains("end inside a run"));
    // Runs and codes for fewer elements than the chunk has.
    let frame = zstd::compress_shorter(&[[3u8; 40].as_slice(), &[1; 39]].concat(), 3).unwrap();
    bad.truncate(HEADER_LEN - 8);
    bad.extend_from_slice(&39u32.to_le_bytes());
    bad.extend_from_slice(&40u32.to_le_bytes());
    bad.extend_from_slice(&frame);
    assert!(decode::<f32>(&bad, &mut out).unwrap_err().contains("do not make"));
}
