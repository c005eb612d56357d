//! Hostile and malformed SEG-Y: every one must end in an error that names
//! what is wrong and where (trace number, byte offset), never a panic, a
//! hang or an allocation sized by a number read from the file. Also the
//! little-endian rev 2 files segyio cannot write, crafted here and checked
//! value by value against their big-endian twins.

use vds_segy::writer::{binary_header, trace_header, TraceKeys};
use vds_segy::{text, Encoding, Endian, ErrorKind, Geometry, KeyBytes, SampleFormat, SegyFile, Sorting};

/// A file of `il` x `xl` traces of `ns` samples, value = trace * 1000 + sample.
fn survey(endian: Endian, format: SampleFormat, il: i32, xl: i32, ns: u64) -> Vec<u8> {
    let mut f = text::encode(&text::card(&["C 1 test"]), Encoding::Ebcdic);
    f.extend(binary_header(endian, format, ns, 2000.0).unwrap());
    let mut t = 0u64;
    for i in 0..il {
        for j in 0..xl {
            let keys = TraceKeys {
                index: t,
                inline: 10 + i,
                crossline: 20 + 2 * j,
                samples: ns as u16,
                interval: 2000,
                xy: Some([1000.0 + 25.0 * f64::from(i), 5000.0 + 12.5 * f64::from(j)]),
                ..TraceKeys::default()
            };
            f.extend(trace_header(endian, &keys, [189, 193, 37]));
            let native: Vec<u8> = (0..ns)
                .flat_map(|s| {
                    let v = (t * 1000 + s) % 100;
                    match format.dtype() {
                        "float32" => (v as f32).to_ne_bytes().to_vec(),
                        "float64" => (v as f64).to_ne_bytes().to_vec(),
                        "int8" | "uint8" => vec![v as u8],
                        "int16" | "uint16" => (v as u16).to_ne_bytes().to_vec(),
                        "int32" | "uint32" => (v as u32).to_ne_bytes().to_vec(),
                        _ => v.to_ne_bytes().to_vec(),
                    }
                })
                .collect();
            let mut enc = vec![0u8; ns as usize * format.size()];
            format.encode(endian, &native, &mut enc);
            f.extend(enc);
            t += 1;
        }
    }
    f
}

fn open_err(bytes: &[u8]) -> vds_segy::Error {
    match SegyFile::open(bytes) {
        Ok(f) => match Geometry::scan(&f, KeyBytes::default(), &mut |_| true) {
            Ok(_) => panic!("accepted"),
            Err(e) => e,
        },
        Err(e) => e,
    }
}

#[test]
fn a_regular_survey_has_its_geometry_and_coordinates() {
    let f = survey(Endian::Big, SampleFormat::IbmFloat32, 3, 4, 10);
    let file = SegyFile::open(&f[..]).unwrap();
    assert_eq!((file.traces, file.samples), (12, 10));
    let g = Geometry::scan(&file, KeyBytes::default(), &mut |_| true).unwrap();
    assert_eq!((g.inlines.first, g.inlines.count, g.crosslines.first, g.crosslines.step, g.crosslines.count), (10, 3, 20, 2, 4));
    assert!(g.complete());
    assert_eq!(g.sorting, Sorting::Inline);
    let s = g.survey.unwrap();
    assert!((s.origin[0] - 1000.0).abs() < 1e-6 && (s.origin[1] - 5000.0).abs() < 1e-6, "{s:?}");
    assert!((s.inline_spacing[0] - 25.0).abs() < 1e-6 && s.inline_spacing[1].abs() < 1e-6);
    // 12.5 world units per crossline step of 2 numbers.
    assert!((s.crossline_spacing[1] - 6.25).abs() < 1e-6, "{s:?}");
}

#[test]
fn little_endian_rev2_reads_as_its_big_endian_twin() {
    for format in SampleFormat::ALL {
        let big = survey(Endian::Big, format, 2, 3, 7);
        let little = survey(Endian::Little, format, 2, 3, 7);
        let (b, l) = (SegyFile::open(&big[..]).unwrap(), SegyFile::open(&little[..]).unwrap());
        assert_eq!(l.binary.endian, Endian::Little, "{format:?}");
        assert_eq!(l.binary.revision.0, 2);
        let n = 7 * format.native_size();
        let (mut x, mut y, mut s) = (vec![0u8; n], vec![0u8; n], Vec::new());
        for t in 0..6 {
            b.read_samples(t, 0, &mut x, &mut s).unwrap();
            l.read_samples(t, 0, &mut y, &mut s).unwrap();
            assert_eq!(x, y, "{format:?} trace {t}");
        }
        let gl = Geometry::scan(&l, KeyBytes::default(), &mut |_| true).unwrap();
        assert_eq!(gl.cells, Geometry::scan(&b, KeyBytes::default(), &mut |_| true).unwrap().cells);
    }
}

#[test]
fn truncated_files_name_the_trace_and_byte() {
    let f = survey(Endian::Big, SampleFormat::Float32, 2, 2, 10);
    let e = open_err(&f[..f.len() - 3]);
    assert_eq!(e.kind(), ErrorKind::Malformed);
    assert_eq!(e.trace_number(), Some(4));
    assert_eq!(e.offset(), Some(3600 + 3 * 280));
    assert!(e.to_string().starts_with("trace 4 (byte 4440): the file ends 277 bytes into this trace"), "{e}");
    for cut in [0, 100, 3200, 3599] {
        assert_eq!(open_err(&f[..cut]).kind(), ErrorKind::Malformed);
    }
}

#[test]
fn zero_samples_and_absurd_counts_are_errors() {
    let mut f = survey(Endian::Big, SampleFormat::Float32, 1, 2, 10);
    // 0 samples in the binary header and in the first trace header.
    let mut z = f.clone();
    z[3220..3222].fill(0);
    z[3600 + 114..3600 + 116].fill(0);
    let e = open_err(&z);
    assert!(e.to_string().contains("0 samples per trace"), "{e}");
    assert_eq!(e.offset(), Some(3220), "the binary header's count: {e}");
    // 32,767 extended textual headers announced in a small file.
    let mut x = f.clone();
    x[3504..3506].copy_from_slice(&0x7fffu16.to_be_bytes());
    let e = open_err(&x);
    assert!(e.to_string().contains("32767 extended textual headers"), "{e}");
    // Variable number (-1) without the end stanza.
    x[3504..3506].copy_from_slice(&0xffffu16.to_be_bytes());
    assert_eq!(open_err(&x).kind(), ErrorKind::Malformed);
    // A format code nothing defines, and format 4.
    f[3224..3226].copy_from_slice(&77u16.to_be_bytes());
    assert!(open_err(&f).to_string().starts_with("byte 3224: sample format code 77"));
    f[3224..3226].copy_from_slice(&4u16.to_be_bytes());
    assert_eq!(open_err(&f).kind(), ErrorKind::Unsupported);
}

#[test]
fn duplicates_and_gridless_numbers_are_geometry_errors() {
    let mut f = survey(Endian::Big, SampleFormat::Int16, 2, 2, 4);
    let t2 = 3600 + 248;
    // Trace 2 takes trace 1's crossline.
    f[t2 + 192..t2 + 196].copy_from_slice(&20i32.to_be_bytes());
    let e = open_err(&f);
    assert_eq!((e.kind(), e.trace_number()), (ErrorKind::Geometry, Some(2)));
    assert!(e.to_string().contains("duplicate trace: inline 10, crossline 20, as trace 1"), "{e}");
    // Inline numbers far apart make a grid far larger than the traces.
    f[t2 + 188..t2 + 192].copy_from_slice(&2_000_000_000i32.to_be_bytes());
    let e = open_err(&f);
    assert!(e.to_string().contains("are probably not the inline and crossline numbers"), "{e}");
    // Named: the trace with the far number, and the byte holding it.
    assert!(e.to_string().contains("the largest inline number, 2000000000, is this trace's"), "{e}");
    assert_eq!((e.trace_number(), e.offset()), (Some(2), Some(t2 as u64 + 188)));
    // Key positions outside the header.
    let file = SegyFile::open(&f[..]).unwrap();
    let bad = KeyBytes { inline: 238, ..KeyBytes::default() };
    assert_eq!(Geometry::scan(&file, bad, &mut |_| true).unwrap_err().kind(), ErrorKind::InvalidArgument);
}

#[test]
fn missing_traces_and_crossline_sorting() {
    // Crossline-sorted: write the traces of a 2 x 3 grid column by column, leaving one out.
    let full = survey(Endian::Big, SampleFormat::Float32, 2, 3, 5);
    let tb = 240 + 20;
    let mut f = full[..3600].to_vec();
    for j in 0..3 {
        for i in 0..2 {
            if (i, j) != (1, 2) {
                f.extend_from_slice(&full[3600 + (i * 3 + j) * tb..3600 + (i * 3 + j + 1) * tb]);
            }
        }
    }
    let file = SegyFile::open(&f[..]).unwrap();
    let g = Geometry::scan(&file, KeyBytes::default(), &mut |_| true).unwrap();
    assert_eq!(g.sorting, Sorting::Crossline);
    assert_eq!(g.cell_count(), 6);
    assert!(!g.complete());
    assert_eq!(g.cells, vec![1, 3, 5, 2, 4, 0]);
}

#[test]
fn fuzz_seeds_never_panic() {
    for format in [SampleFormat::IbmFloat32, SampleFormat::Int24, SampleFormat::Float64] {
        let f = survey(Endian::Little, format, 2, 2, 3);
        for cut in (0..f.len()).step_by(97) {
            vds_segy::fuzzing::parse(&f[..cut]);
        }
        let mut g = f.clone();
        for at in (3200..3600).step_by(3) {
            g[at] ^= 0xa5;
            vds_segy::fuzzing::parse(&g);
        }
    }
}

#[test]
fn rev0_key_positions_9_and_21() {
    let endian = Endian::Big;
    let mut f = text::encode(&text::card(&["C 1 rev 0"]), Encoding::Ebcdic);
    f.extend(binary_header(endian, SampleFormat::IbmFloat32, 2, 4000.0).unwrap());
    for t in 0..6u64 {
        let keys = TraceKeys { index: t, inline: 100 + (t / 3) as i32, crossline: 7 + (t % 3) as i32, samples: 2, ..TraceKeys::default() };
        f.extend(trace_header(endian, &keys, [9, 21, 37]));
        f.extend([0x41, 0x10, 0, 0, 0x42, 0x20, 0, 0]);
    }
    let file = SegyFile::open(&f[..]).unwrap();
    // At the rev 1 positions there is nothing: every trace is inline 0, crossline 0.
    let e = Geometry::scan(&file, KeyBytes::default(), &mut |_| true).unwrap_err();
    assert!(e.to_string().contains("see --inline-byte and --crossline-byte"), "{e}");
    let g = Geometry::scan(&file, KeyBytes { inline: 9, crossline: 21, ..KeyBytes::default() }, &mut |_| true).unwrap();
    assert_eq!((g.inlines.first, g.inlines.count, g.crosslines.first, g.crosslines.count), (100, 2, 7, 3));
    assert!(g.complete());
}
