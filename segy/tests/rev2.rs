//! SEG-Y rev 2 features segyio does not write, crafted here: sample counts
//! beyond 32,767 and 65,535 (the extended count at bytes 3269-3272), variable-length
//! traces (fixed-length flag 0, each trace header giving its own count),
//! and the byte offset of the first trace (bytes 3521-3528).

use vds_segy::binary::{set_field, FieldType};
use vds_segy::writer::{binary_header, trace_header, TraceKeys};
use vds_segy::{text, Encoding, Endian, Geometry, KeyBytes, SampleFormat, SegyFile};

fn head(endian: Endian, format: SampleFormat, ns: u64) -> Vec<u8> {
    let mut f = text::encode(&text::card(&["C 1 rev 2"]), Encoding::Ascii);
    f.extend(binary_header(endian, format, ns, 500.0).unwrap());
    f
}

fn trace(f: &mut Vec<u8>, endian: Endian, t: u64, ns: u64, value: impl Fn(u64) -> i16) {
    let samples = vds_segy::writer::short_count(ns);
    let keys = TraceKeys { index: t, inline: 1, crossline: 1 + t as i32, samples, interval: 500, ..TraceKeys::default() };
    f.extend(trace_header(endian, &keys, [189, 193, 37]));
    for s in 0..ns {
        f.extend(match endian {
            Endian::Big => value(s).to_be_bytes(),
            Endian::Little => value(s).to_le_bytes(),
        });
    }
}

#[test]
fn extended_sample_counts_beyond_32767() {
    for endian in [Endian::Big, Endian::Little] {
        let ns = 40_000;
        let mut f = head(endian, SampleFormat::Int16, ns);
        // The 16-bit count says 0: the extended one rules.
        set_field(&mut f[3200..], 21, FieldType::U16, endian, 0);
        for t in 0..3 {
            trace(&mut f, endian, t, ns, |s| (s % 30_000) as i16 - t as i16);
        }
        let file = SegyFile::open(&f[..]).unwrap();
        assert_eq!((file.binary.revision.0, file.samples, file.traces), (2, ns, 3));
        let mut out = vec![0u8; 2 * 10];
        file.read_samples(2, 35_000, &mut out, &mut Vec::new()).unwrap();
        let got: Vec<i16> = out.chunks_exact(2).map(|c| i16::from_ne_bytes([c[0], c[1]])).collect();
        assert_eq!(got, (35_000..35_010).map(|s| (s % 30_000) as i16 - 2).collect::<Vec<_>>());
        let g = Geometry::scan(&file, KeyBytes::default(), &mut |_| true).unwrap();
        assert!(g.two_d && g.complete());
    }
}

/// Beyond 65,535 samples neither 16-bit count can say it: the writer puts 0
/// in both and the count in the extended field, which the reader takes.
#[test]
fn written_counts_beyond_65535_read_back() {
    for endian in [Endian::Big, Endian::Little] {
        let ns = 70_001;
        let mut f = head(endian, SampleFormat::Int16, ns);
        assert_eq!(vds_segy::binary::field_i64(&f[3200..], 21, FieldType::U16, endian), Some(0));
        assert_eq!(vds_segy::binary::field_i64(&f[3200..], 69, FieldType::I32, endian), Some(ns as i64));
        for t in 0..2 {
            trace(&mut f, endian, t, ns, |s| (s % 20_000) as i16 + t as i16);
        }
        let file = SegyFile::open(&f[..]).unwrap();
        assert_eq!((file.binary.revision.0, file.samples, file.traces), (2, ns, 2));
        let mut out = vec![0u8; 2 * 4];
        file.read_samples(1, 69_997, &mut out, &mut Vec::new()).unwrap();
        let got: Vec<i16> = out.chunks_exact(2).map(|c| i16::from_ne_bytes([c[0], c[1]])).collect();
        assert_eq!(got, (69_997..70_001).map(|s| (s % 20_000) as i16 + 1).collect::<Vec<_>>());
    }
    let e = binary_header(Endian::Big, SampleFormat::Int16, 1 << 31, 500.0).unwrap_err();
    assert!(e.to_string().contains("at most 2147483647"), "{e}");
}

#[test]
fn variable_length_traces() {
    let endian = Endian::Big;
    let mut f = head(endian, SampleFormat::Int16, 5);
    f[3500] = 2;
    set_field(&mut f[3200..], 303, FieldType::I16, endian, 0);
    let lengths = [3u64, 5, 4];
    for (t, &ns) in lengths.iter().enumerate() {
        trace(&mut f, endian, t as u64, ns, |s| 10 * t as i16 + s as i16);
    }
    let file = SegyFile::open(&f[..]).unwrap();
    assert!(file.variable_length());
    assert_eq!((file.samples, file.traces), (5, 3));
    assert_eq!(file.locate(2).unwrap(), (3600 + (240 + 6) + (240 + 10), 4));
    // A short trace leaves what the buffer held past its end.
    let mut out = vec![0xffu8; 10];
    file.read_samples(0, 0, &mut out, &mut Vec::new()).unwrap();
    let mut want: Vec<u8> = [0i16, 1, 2].iter().flat_map(|v| v.to_ne_bytes()).collect();
    want.extend([0xff; 4]);
    assert_eq!(out, want);
    // The last trace cut short is named.
    let e = SegyFile::open(&f[..f.len() - 1]).err().unwrap();
    assert_eq!(e.trace_number(), Some(3));
    assert!(e.to_string().contains("needs 4 samples"), "{e}");
}

#[test]
fn first_trace_offset_of_rev2() {
    let endian = Endian::Little;
    let mut f = head(endian, SampleFormat::Int16, 2);
    // 100 bytes of padding before the first trace, said in the header.
    set_field(&mut f[3200..], 321, FieldType::U64, endian, 3700);
    f.extend([0u8; 100]);
    trace(&mut f, endian, 0, 2, |s| s as i16 + 7);
    let file = SegyFile::open(&f[..]).unwrap();
    assert_eq!((file.first_trace, file.traces), (3700, 1));
    set_field(&mut f[3200..], 321, FieldType::U64, endian, 1 << 40);
    assert!(SegyFile::open(&f[..]).err().unwrap().to_string().contains("outside the file's traces"));
}
