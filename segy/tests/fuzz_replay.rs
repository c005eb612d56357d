//! Every input in the `segy` fuzz corpus (fuzz/corpus/segy/) and every
//! saved crash (segy/tests/fuzz/) runs through the function the fuzz target
//! calls, on stable Rust. `VDS_WRITE_SEEDS=1 cargo test --release -p
//! vds-segy --test fuzz_replay` rewrites the seed files.

use std::path::{Path, PathBuf};
use vds_segy::writer::{binary_header, trace_header, TraceKeys};
use vds_segy::{text, Encoding, Endian, SampleFormat};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> =
        std::fs::read_dir(dir).map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file()).collect()).unwrap_or_default();
    v.sort();
    v
}

/// Small files of each byte order and a few formats, with headers worth mutating.
fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (endian, format, ext) in
        [(Endian::Big, SampleFormat::IbmFloat32, 0i16), (Endian::Little, SampleFormat::Int24, 1), (Endian::Big, SampleFormat::Int16, -1)]
    {
        let mut f = text::encode(&text::card(&["C 1 seed"]), Encoding::Ebcdic);
        let mut b = binary_header(endian, format, 4, 1000.0).unwrap();
        b[304..306].copy_from_slice(&match endian {
            Endian::Big => ext.to_be_bytes(),
            Endian::Little => ext.to_le_bytes(),
        });
        f.extend(b);
        if ext != 0 {
            f.extend(text::encode("((SEG: EndText))", Encoding::Ascii));
        }
        for t in 0..4u64 {
            let keys =
                TraceKeys { index: t, inline: 1 + (t / 2) as i32, crossline: 1 + (t % 2) as i32, samples: 4, ..TraceKeys::default() };
            f.extend(trace_header(endian, &keys, [189, 193, 37]));
            f.extend((0..4 * format.size()).map(|i| (i as u8).wrapping_mul(41) | 0x10));
        }
        out.push((format!("{}-format{}-ext{ext}", endian.name(), format.code()), f));
    }
    // Rev 2, variable-length traces with one trace header extension each
    // (Extension 1 saying so, and giving the sample count).
    let mut f = text::encode(&text::card(&["C 1 seed"]), Encoding::Ascii);
    let mut b = binary_header(Endian::Big, SampleFormat::Float32, 4, 1000.0).unwrap();
    b[300] = 2;
    b[302..304].copy_from_slice(&0i16.to_be_bytes());
    b[306..310].copy_from_slice(&1i32.to_be_bytes());
    f.extend(b);
    for t in 0..4u64 {
        let keys = TraceKeys { index: t, inline: 1 + (t / 2) as i32, crossline: 1 + (t % 2) as i32, samples: 0, ..TraceKeys::default() };
        f.extend(trace_header(Endian::Big, &keys, [189, 193, 37]));
        let mut ext = [0u8; 240];
        ext[136..140].copy_from_slice(&(3 + t as u32 % 2).to_be_bytes());
        ext[156..158].copy_from_slice(&1u16.to_be_bytes());
        ext[232..240].copy_from_slice(b"SEG00001");
        f.extend(ext);
        f.extend((0..4 * (3 + t % 2)).map(|i| (i as u8).wrapping_mul(37) | 0x20));
    }
    out.push(("big-format5-rev2-extension1".into(), f));
    out
}

#[test]
fn replay_corpus_and_crashes() {
    let corpus = root().join("fuzz/corpus/segy");
    if std::env::var_os("VDS_WRITE_SEEDS").is_some() {
        std::fs::create_dir_all(&corpus).unwrap();
        for (name, bytes) in seeds() {
            std::fs::write(corpus.join(format!("seed-{name}")), bytes).unwrap();
        }
    }
    let mut n = 0;
    for (_, bytes) in seeds() {
        vds_segy::fuzzing::parse(&bytes);
        n += 1;
    }
    for dir in [corpus, root().join("segy/tests/fuzz")] {
        for f in files(&dir) {
            vds_segy::fuzzing::parse(&std::fs::read(&f).unwrap());
            n += 1;
        }
    }
    assert!(n >= 6, "the committed corpus is missing: {n} inputs");
}
