//! Every input in the fuzz corpora (fuzz/corpus/<target>/) and every saved
//! crash (tests/fuzz/<target>/) runs through the same function its fuzz
//! target calls, on stable Rust, so CI checks them without nightly or
//! libFuzzer. `VDS_WRITE_SEEDS=1 cargo test --release --test fuzz_replay`
//! writes the seed corpora.

use std::path::{Path, PathBuf};

type Target = fn(&[u8]);

const TARGETS: [(&str, Target); 7] = [
    ("descriptor", vds::fuzzing::descriptor),
    ("index_page", vds::fuzzing::index_page),
    ("codec", vds::fuzzing::codec),
    ("open_read", vds::fuzzing::open_read),
    ("mutate", vds::fuzzing::mutate),
    ("merge", vds::fuzzing::merge),
    ("bounded", vds::fuzzing::bounded),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> =
        std::fs::read_dir(dir).map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_file()).collect()).unwrap_or_default();
    v.sort();
    v
}

/// Seed inputs for each target, made from real files and real encodings.
fn seeds() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut out = Vec::new();
    let golden = std::fs::read(root().join("tests/data/v1/golden-1.0.vds")).unwrap();
    let nl1 = golden.iter().position(|&c| c == b'\n').unwrap();
    let nl2 = nl1 + 1 + golden[nl1 + 1..].iter().position(|&c| c == b'\n').unwrap();
    let desc = std::str::from_utf8(&golden[nl1 + 1..nl2]).unwrap().trim_end().to_string();
    out.push(("descriptor", "golden".into(), desc.clone().into_bytes()));
    out.push(("descriptor", "minimal".into(), br#"{"format":"vds","version":[1,0],"axes":[{"name":"x","samples":3,"first":0,"last":2}],"variables":[{"name":"v","dtype":"int8","axes":["x"],"chunk":[2],"fill":0,"codec":{"id":"none"}}]}"#.to_vec()));
    out.push(("descriptor", "features".into(), desc.replace("\"incompat\":[]", "\"incompat\":[\"x\"]").into_bytes()));
    // Descriptor size and name counts (SPEC.md 3): many names, the deepest
    // nesting allowed and one level more, and a long array within the limits.
    let minimal = |vars: &str, slots: &str, attrs: &str| {
        format!(
            r#"{{"format":"vds","version":[1,3],"axes":[{{"name":"x","samples":3,"first":0,"last":2}}],"variables":[{vars}],"slots":[{slots}],"attributes":{attrs}}}"#
        )
        .into_bytes()
    };
    let var = |i: usize| format!(r#"{{"name":"v{i}","dtype":"int8","axes":["x"],"chunk":[2],"fill":0,"codec":{{"id":"none"}}}}"#);
    let vars = (0..1000).map(var).collect::<Vec<_>>().join(",");
    out.push(("descriptor", "many-variables".into(), minimal(&vars, "", "{}")));
    let slots = (0..4000).map(|i| format!(r#"{{"name":"s{i}"}}"#)).collect::<Vec<_>>().join(",");
    out.push(("descriptor", "many-slots".into(), minimal(&var(0), &slots, "{}")));
    for (name, depth) in [("nesting-127", 125), ("nesting-128", 126)] {
        out.push(("descriptor", name.into(), minimal(&var(0), "", &format!(r#"{{"a":{}{}}}"#, "[".repeat(depth), "]".repeat(depth)))));
    }
    out.push(("descriptor", "long-array".into(), minimal(&var(0), "", &format!(r#"{{"z":[{}]}}"#, vec!["0"; 50_000].join(",")))));
    // The index pages of the golden file: the newest slot's root.
    let head = nl2 + 1;
    let seq = |at: usize| u64::from_le_bytes(golden[at + 16..at + 24].try_into().unwrap());
    let slot = if seq(head + 512) > seq(head) { head + 512 } else { head };
    let root_at = u64::from_le_bytes(golden[slot + 64..slot + 72].try_into().unwrap()) as usize;
    let level = golden[slot + 72];
    let mut page = vec![0x80 | level];
    page.extend_from_slice(&golden[root_at..root_at + 4096]);
    out.push(("index_page", "golden-root".into(), page));
    // Codec inputs: selector bytes (dtype, codec byte, element count) then stored bytes.
    let floats: Vec<u8> = (0..256u32).flat_map(|i| ((i / 3) as f32).to_le_bytes()).collect();
    // A real zstd frame of the floats, from an independent encoder, so that the
    // fuzzer starts inside the frame parser rather than at its magic number.
    let frame = ruzstd::encoding::compress_to_vec(&floats[..], ruzstd::encoding::CompressionLevel::Fastest);
    for (name, dtype, codec_byte, stored) in [
        ("none-f32", 8u64, 0u8, &floats),
        ("deflate-f32", 8, 1, &floats),
        ("shuffle-f32", 8, 0x11, &floats),
        ("bool", 10, 1, &floats),
        ("zstd-f32", 8, 2, &frame),
        ("shuffle-zstd-f32", 8, 0x12, &frame),
    ] {
        // The fuzzing input reader takes u64s most significant byte first.
        let msb_first = |x: u64| (0..8).rev().map(move |k| (x >> (8 * k)) as u8);
        let mut d: Vec<u8> = msb_first(dtype).collect();
        d.push(codec_byte);
        d.extend(msb_first(255));
        d.extend_from_slice(stored);
        out.push(("codec", name.into(), d));
    }
    // Bounded codec inputs: selector, shape, tolerance, then values (or a stream).
    let msb_first = |x: u64| (0..8).rev().map(move |k| (x >> (8 * k)) as u8);
    for (name, sel, values) in [
        ("bounded-f32", 0u8, (0..4u32 * 4 * 16).flat_map(|i| ((i as f32) * 0.3).sin().to_le_bytes()).collect::<Vec<u8>>()),
        (
            "bounded-f64-specials",
            1,
            [0.5f64, f64::NAN, f64::INFINITY, -0.0, 1e300, -1e300, 5e-324, 0.5].iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
    ] {
        let mut d = vec![sel];
        for x in [3u64, 3, 15, 40, 500] {
            d.extend(msb_first(x));
        }
        d.extend_from_slice(&values);
        out.push(("bounded", name.into(), d));
    }
    // Whole files: small random samples, and the golden file.
    for i in 0..4u8 {
        let seed: Vec<u8> = (0..48).map(|k| k ^ (i * 37)).collect();
        out.push(("open_read", format!("sample-{i}"), vds::fuzzing::sample(&seed).bytes));
        let mut m = seed.clone();
        m.extend_from_slice(&[0, 0, 0x10, 0xff, 0, 0, 0x20, 0x01]);
        out.push(("mutate", format!("seed-{i}"), m));
    }
    out.push(("open_read", "golden".into(), golden));
    out.push(("open_read", "golden-1.3-zstd".into(), std::fs::read(root().join("tests/data/v1.3/golden-1.3-zstd.vds")).unwrap()));
    // Fragments: untouched, a flipped chunk byte, a flipped seal byte (raw and resealed), cut short.
    out.push(("merge", "untouched".into(), vec![0]));
    out.push(("merge", "chunk-byte".into(), vec![0, 40, 0, 0x10]));
    for mode in [0u8, 1] {
        out.push(("merge", format!("seal-byte-{mode}"), vec![mode, 0xf0, 0xff, 0x01]));
    }
    out.push(("merge", "truncated".into(), vec![0, 0xff, 0xff, 0]));
    out
}

#[test]
fn corpora_and_crash_inputs_replay_without_failure() {
    if std::env::var_os("VDS_WRITE_SEEDS").is_some() {
        for (target, name, data) in seeds() {
            let dir = root().join("fuzz/corpus").join(target);
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(format!("seed-{name}")), data).unwrap();
        }
    }
    for (target, run) in TARGETS {
        let corpus = files(&root().join("fuzz/corpus").join(target));
        assert!(!corpus.is_empty(), "fuzz/corpus/{target} has no inputs");
        let crashes = files(&root().join("tests/fuzz").join(target));
        for f in corpus.iter().chain(&crashes) {
            // A running fuzzer may remove corpus files while this test reads them.
            let data = match std::fs::read(f) {
                Ok(d) => d,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => panic!("{}: {e}", f.display()),
            };
            // A panic here names the input: rerun with `cargo +nightly fuzz run {target} <file>`.
            eprintln!("replaying {}", f.display());
            run(&data);
        }
    }
}
