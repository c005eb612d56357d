//! Container-level promises: constant chunks cost only an index entry,
//! chunks can live in external files, attributes survive commits, the head
//! shows the newest descriptor, and one writer at a time.

mod common;
use common::*;
use vds::serde_json::json;
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, ErrorKind, Order, Region, SlotPolicy, VariableBuilder};

fn volume(name: &str, chunk: u64) -> DatasetBuilder {
    let mut b = DatasetBuilder::new();
    b.axis(Axis::new("x", 40)).axis(Axis::new("y", 30)).axis(Axis::new("z", 20));
    b.variable(VariableBuilder::new(name, DType::Float64, &["x", "y", "z"]).chunk(&[chunk, chunk, chunk]).fill(f64::NAN));
    b
}

#[test]
fn constant_chunks_are_index_entries_only() {
    let dir = Scratch::new("constant");
    let path = dir.path("c.vds");
    let mut ds = volume("v", 10).create(&path).unwrap();
    let empty_len = std::fs::metadata(&path).unwrap().len();
    // 4 x 3 x 2 = 24 chunks: all 2.5, then one region of NaN (the fill), bitwise.
    ds.write("v", &Region::full(&[40, 30, 20]).unwrap(), Order::C, &vec![2.5f64; 24000]).unwrap();
    ds.write("v", &Region::new(&[10, 0, 0], &[10, 10, 10]).unwrap(), Order::C, &vec![f64::NAN; 1000]).unwrap();
    ds.close().unwrap();
    let ds = Dataset::open(&path).unwrap();
    let s = ds.stats().unwrap();
    assert_eq!((s.stored_chunks, s.constant_chunks, s.fill_chunks), (0, 23, 1), "{s:?}");
    assert_eq!(s.stored_bytes, 0);
    // Nothing but one index page and the commit were added: 24 chunks of 8000 bytes would be 192000.
    let grown = std::fs::metadata(&path).unwrap().len() - empty_len;
    assert!(grown <= 4096, "the file grew by {grown} bytes");
    let all: Vec<f64> = ds.read_vec("v", &Region::full(&[40, 30, 20]).unwrap(), Order::C).unwrap();
    let nan = all.iter().filter(|v| v.is_nan()).count();
    assert_eq!(nan, 1000);
    assert_eq!(all.iter().filter(|&&v| v == 2.5).count(), 23000);
    // Unwritten regions read as the fill value.
    let mut ds = volume("v", 10).overwrite(true).create(&path).unwrap();
    let got: Vec<f64> = ds.read_vec("v", &Region::new(&[0, 0, 0], &[3, 3, 3]).unwrap(), Order::C).unwrap();
    assert!(got.iter().all(|v| v.is_nan()));
    // Edge chunks count as constant when their valid part is.
    ds.write("v", &Region::new(&[30, 0, 0], &[10, 30, 20]).unwrap(), Order::Fortran, &vec![-1.0f64; 6000]).unwrap();
    assert_eq!(ds.stats().unwrap().constant_chunks, 6);
}

#[test]
fn chunks_in_two_external_files_and_the_container() {
    let dir = Scratch::new("slots");
    let path = dir.path("main.vds");
    let mut b = volume("v", 8);
    b.external_slot("main.vds.1").external_slot("data/main.vds.2");
    std::fs::create_dir_all(dir.path("data")).unwrap();
    let mut ds = b.create(&path).unwrap();
    assert_eq!(ds.external_slots(), vec!["main.vds.1", "data/main.vds.2"]);
    ds.set_slot_policy(SlotPolicy::RoundRobin(vec![0, 1, 2])).unwrap();
    let values: Vec<f64> = (0..24000).map(|i| f64::from(i) * 0.125).collect();
    ds.write("v", &Region::full(&[40, 30, 20]).unwrap(), Order::C, &values).unwrap();
    ds.close().unwrap();
    let sizes: Vec<u64> = ["main.vds.1", "data/main.vds.2"].iter().map(|f| std::fs::metadata(dir.path(f)).unwrap().len()).collect();
    // 5 x 4 x 3 = 60 stored chunks, 20 per file, 4096 bytes each, after the 32-byte slot header.
    assert_eq!(sizes, [32 + 20 * 4096, 32 + 20 * 4096]);
    let ds = Dataset::open(&path).unwrap();
    let got: Vec<f64> = ds.read_vec("v", &Region::full(&[40, 30, 20]).unwrap(), Order::C).unwrap();
    assert_eq!(got, values);
    drop(ds);
    // By size: slot 1 takes chunks until it holds 40000 bytes, then slot 2 takes the rest.
    let mut ds = Dataset::open_rw(&path).unwrap();
    ds.set_slot_policy(SlotPolicy::BySize { slots: vec![1, 2], max_bytes: sizes[0] + 40000 }).unwrap();
    let v2: Vec<f64> = values.iter().map(|v| v + 1.0).collect();
    ds.write("v", &Region::full(&[40, 30, 20]).unwrap(), Order::C, &v2).unwrap();
    ds.close().unwrap();
    let s1 = std::fs::metadata(dir.path("main.vds.1")).unwrap().len() - sizes[0];
    let s2 = std::fs::metadata(dir.path("data/main.vds.2")).unwrap().len() - sizes[1];
    assert!((40000..40000 + 4096).contains(&s1) && s2 > 0, "slot 1 grew {s1}, slot 2 grew {s2}");
    let got: Vec<f64> = Dataset::open(&path).unwrap().read_vec("v", &Region::full(&[40, 30, 20]).unwrap(), Order::C).unwrap();
    assert_eq!(got, v2);
    // A missing external file is an error that names it, not wrong data.
    std::fs::remove_file(dir.path("data/main.vds.2")).unwrap();
    let e = Dataset::open(&path).unwrap().read_vec::<f64>("v", &Region::full(&[40, 30, 20]).unwrap(), Order::C).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound);
    assert!(e.to_string().contains("main.vds.2"), "{e}");
    let mut ds = Dataset::open_rw(&path).unwrap();
    assert_eq!(ds.set_slot_policy(SlotPolicy::Fixed(3)).unwrap_err().kind(), ErrorKind::InvalidArgument);
}

#[test]
fn escaping_slot_names_are_refused() {
    let dir = Scratch::new("escape");
    for bad in ["../x", "/tmp/x", "a/../../x", ""] {
        let mut b = volume("v", 8);
        b.external_slot(bad);
        let e = b.create(dir.path("e.vds")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad}");
        assert!(e.to_string().contains("slot"), "{e}");
    }
    let mut b = volume("v", 8);
    b.external_slot("d.1").external_slot("d.1");
    assert!(b.create(dir.path("d.vds")).unwrap_err().to_string().contains("listed twice"));
    let mut b = volume("v", 8);
    b.external_slot("self.vds");
    assert!(b.create(dir.path("self.vds")).unwrap_err().to_string().contains("the container itself"));
}

#[test]
fn attributes_that_would_not_read_back_are_refused() {
    let dir = Scratch::new("deep");
    let mut deep = json!(1);
    for _ in 0..200 {
        deep = json!([deep]);
    }
    let mut b = volume("v", 8);
    b.attribute("deep", deep.clone());
    let e = b.create(dir.path("deep.vds")).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("nested too deeply"), "{e}");
    let mut ds = volume("v", 8).create(dir.path("deep.vds")).unwrap();
    assert_eq!(ds.set_attribute("deep", Some(deep)).unwrap_err().kind(), ErrorKind::InvalidArgument);
    // The refused change leaves nothing behind.
    assert!(ds.attributes().get("deep").is_none());
    ds.close().unwrap();
    assert!(Dataset::open(dir.path("deep.vds")).unwrap().attributes().is_empty());
}

#[test]
fn attribute_names_a_set_refuses_are_refused_at_creation_too() {
    let dir = Scratch::new("attr-names");
    for bad in ["", "a\nb", "tab\there", &"n".repeat(256)] {
        let mut b = volume("v", 8);
        b.attribute(bad, 1);
        let e = b.create(dir.path("a.vds")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{bad:?}");
        assert!(e.to_string().contains("must be 1 to 255 bytes without control characters"), "{e}");
        let mut v = VariableBuilder::new("w", DType::Int8, &["x"]);
        v.attribute(bad, 1);
        let e = volume("v", 8).variable(&v).create(dir.path("a.vds")).unwrap_err();
        assert!(e.to_string().contains(r#"variable "w": attribute name"#), "{e}");
        let mut ds = volume("v", 8).overwrite(true).create(dir.path("a.vds")).unwrap();
        assert_eq!(ds.set_attribute(bad, Some(json!(1))).unwrap_err().kind(), ErrorKind::InvalidArgument);
        assert_eq!(ds.set_attribute(bad, None).unwrap_err().kind(), ErrorKind::InvalidArgument, "no such attribute to remove");
    }
}

#[test]
fn attributes_set_one_by_one_are_refused_exactly_where_the_whole_descriptor_would_be() {
    // After its first full check, a set is checked by the bounds of what it adds; the
    // descriptor is checked whole only when those bounds would pass a limit. So every
    // attribute taken must read back, and one refused must be refused by a full check too.
    let nested = |levels: usize| (0..levels).fold(json!(1), |v, _| json!([v]));
    let dir = Scratch::new("many-attrs");
    let path = dir.path("m.vds");
    let mut ds = volume("v", 8).create(&path).unwrap();
    for i in 0..50 {
        ds.set_attribute(&format!("a{i}"), Some(json!("x".repeat(100)))).unwrap();
    }
    // The dataset's attributes are 2 levels deep, a variable's 4: a value opens at most 127 - that.
    ds.set_attribute("deep", Some(nested(125))).unwrap();
    assert!(ds.set_attribute("deeper", Some(nested(126))).unwrap_err().to_string().contains("nested too deeply"));
    ds.set_variable_attribute("v", "deep", Some(nested(123))).unwrap();
    assert!(ds.set_variable_attribute("v", "deeper", Some(nested(124))).unwrap_err().to_string().contains("nested too deeply"));
    ds.commit().unwrap();
    let limit = 500_000;
    ds.set_memory_limit(limit);
    let mut taken = 0;
    let refused = loop {
        assert!(taken < 10_000, "attributes beyond the limit taken");
        match ds.set_attribute(&format!("b{taken}"), Some(json!("y".repeat(100)))) {
            Ok(()) => taken += 1,
            Err(e) => break e,
        }
    };
    assert_eq!(refused.kind(), ErrorKind::InvalidArgument);
    assert!(refused.to_string().contains("would not read back"), "{refused}");
    assert!(taken > 100, "{taken}");
    ds.close().unwrap();
    let mut o = vds::OpenOptions::new();
    o.memory_limit(limit).write(true);
    let mut ds = o.open(&path).unwrap();
    assert_eq!(ds.attributes().len(), 51 + taken);
    assert_eq!(ds.attributes()[&format!("b{}", taken - 1)], json!("y".repeat(100)));
    assert_eq!(ds.variable_attributes("v").unwrap()["deep"], nested(123));
    // Opened afresh, the first set is checked in full: the same attribute is refused again.
    let again = ds.set_attribute(&format!("b{taken}"), Some(json!("y".repeat(100)))).unwrap_err();
    assert_eq!(again.to_string(), refused.to_string());
}

fn head_lines(path: &std::path::Path) -> (String, vds::serde_json::Value) {
    let bytes = std::fs::read(path).unwrap();
    let mut lines = bytes.split(|&b| b == b'\n');
    let first = String::from_utf8(lines.next().unwrap().to_vec()).unwrap();
    let second = vds::serde_json::from_slice(lines.next().unwrap()).unwrap();
    (first, second)
}

#[test]
fn attributes_survive_commits_and_the_head_shows_them() {
    let dir = Scratch::new("attrs");
    let path = dir.path("a.vds");
    let mut b = volume("v", 8);
    b.attribute("survey", "Volve").attribute("year", 2008);
    let mut ds = b.create(&path).unwrap();
    let (line1, desc) = head_lines(&path);
    assert_eq!(line1, "VDS 1.8");
    assert_eq!(desc["attributes"], json!({"survey": "Volve", "year": 2008}));
    assert_eq!(desc["axes"][2], json!({"name": "z", "unit": "", "samples": 20, "first": 0.0, "last": 19.0}));
    assert_eq!(desc["variables"][0]["fill"], json!("NaN"));

    ds.set_attribute("processing", Some(json!({"steps": ["migration", "stack"]}))).unwrap();
    ds.set_attribute("year", None).unwrap();
    ds.set_variable_attribute("v", "scale", Some(json!(0.5))).unwrap();
    assert_eq!(ds.set_variable_attribute("w", "x", Some(json!(1))).unwrap_err().kind(), ErrorKind::NotFound);
    ds.close().unwrap();
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.attributes().get("processing"), Some(&json!({"steps": ["migration", "stack"]})));
    assert_eq!(ds.attributes().get("year"), None);
    assert_eq!(ds.variable_attributes("v").unwrap().get("scale"), Some(&json!(0.5)));
    // `head -n 2` shows the newest descriptor.
    let (_, desc) = head_lines(&path);
    assert_eq!(desc["attributes"]["processing"]["steps"][1], json!("stack"));
    assert_eq!(desc["variables"][0]["attributes"]["scale"], json!(0.5));
    drop(ds);

    // A descriptor too large for the head lives in the body; the head keeps the last one that fit.
    let mut ds = Dataset::open_rw(&path).unwrap();
    let big = "x".repeat(20000);
    ds.set_attribute("history", Some(json!(big))).unwrap();
    ds.close().unwrap();
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.attributes()["history"].as_str().unwrap().len(), 20000);
    let (_, desc) = head_lines(&path);
    assert!(desc["attributes"].get("history").is_none());
    assert!(!ds.is_writable());
}

#[test]
fn one_writer_at_a_time_and_read_only_handles_refuse_writes() {
    let dir = Scratch::new("lock");
    let path = dir.path("l.vds");
    let ds = volume("v", 8).create(&path).unwrap();
    let e = Dataset::open_rw(&path).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Locked);
    assert!(e.to_string().contains("l.vds"), "{e}");
    // Readers take no lock.
    let mut r = Dataset::open(&path).unwrap();
    assert_eq!(r.write("v", &Region::full(&[1, 1, 1]).unwrap(), Order::C, &[1.0f64]).unwrap_err().kind(), ErrorKind::ReadOnly);
    assert_eq!(r.set_attribute("a", Some(json!(1))).unwrap_err().kind(), ErrorKind::ReadOnly);
    drop(ds);
    Dataset::open_rw(&path).unwrap();
    assert_eq!(volume("v", 8).create(&path).unwrap_err().kind(), ErrorKind::AlreadyExists);
}

#[test]
fn a_reader_keeps_its_snapshot_while_a_writer_commits() {
    let dir = Scratch::new("snapshot");
    let path = dir.path("s.vds");
    let mut w = volume("v", 8).create(&path).unwrap();
    let all = Region::full(&[40, 30, 20]).unwrap();
    w.write("v", &all, Order::C, &vec![1.0f64; 24000]).unwrap();
    w.commit().unwrap();
    let r = Dataset::open(&path).unwrap();
    let ramp: Vec<f64> = (0..24000).map(f64::from).collect();
    w.write("v", &all, Order::C, &ramp).unwrap();
    w.commit().unwrap();
    assert!(r.read_vec::<f64>("v", &all, Order::C).unwrap().iter().all(|&v| v == 1.0));
    assert_eq!(Dataset::open(&path).unwrap().read_vec::<f64>("v", &all, Order::C).unwrap(), ramp);
    assert_eq!(Dataset::open(&path).unwrap().commit_sequence(), 3);
}

#[test]
fn variables_may_span_a_subset_of_the_axes() {
    let dir = Scratch::new("subset");
    let path = dir.path("m.vds");
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("inline", 12))
        .axis(Axis::new("crossline", 9))
        .axis(Axis::new("sample", 50).unit("ms").coordinates(0.0, 196.0))
        .variable(
            VariableBuilder::new("amplitude", DType::Float32, &["inline", "crossline", "sample"])
                .chunk(&[4, 4, 16])
                .codec(Codec::deflate(6)),
        )
        .variable(VariableBuilder::new("trace_present", DType::Bool, &["inline", "crossline"]).chunk(&[8, 8]).fill(false))
        .variable(VariableBuilder::new("time_major", DType::UInt16, &["sample", "inline"]).chunk(&[7, 5]))
        .create(&path)
        .unwrap();
    let mask: Vec<bool> = (0..108).map(|i| i % 5 != 0).collect();
    ds.write("trace_present", &Region::full(&[12, 9]).unwrap(), Order::C, &mask).unwrap();
    let tm: Vec<u16> = (0..600).collect();
    ds.write("time_major", &Region::full(&[50, 12]).unwrap(), Order::Fortran, &tm).unwrap();
    ds.close().unwrap();
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.variable("trace_present").unwrap().axes(), &[0, 1]);
    assert_eq!(ds.variable("time_major").unwrap().shape(), &[50, 12]);
    assert_eq!(ds.variable(2).unwrap().name(), "time_major");
    assert_eq!(ds.axes()[2].unit_str(), "ms");
    assert_eq!(ds.axes()[2].last(), 196.0);
    assert_eq!(ds.read_vec::<bool>("trace_present", &Region::full(&[12, 9]).unwrap(), Order::C).unwrap(), mask);
    assert_eq!(ds.read_vec::<u16>("time_major", &Region::full(&[50, 12]).unwrap(), Order::Fortran).unwrap(), tm);
    let amp: Vec<f32> = ds.read_vec("amplitude", &Region::new(&[3, 3, 0], &[1, 1, 50]).unwrap(), Order::C).unwrap();
    assert_eq!(amp, vec![0.0; 50]);
}

#[test]
fn invalid_descriptions_are_refused_with_reasons() {
    let dir = Scratch::new("invalid");
    let p = dir.path("i.vds");
    let cases: Vec<(DatasetBuilder, &str)> = vec![
        (
            {
                let mut b = DatasetBuilder::new();
                b.variable(&VariableBuilder::new("v", DType::Int8, &["x"]));
                b
            },
            "axes",
        ),
        (
            {
                let mut b = volume("v", 8);
                b.axis(Axis::new("x", 3));
                b
            },
            "twice",
        ),
        (
            {
                let mut b = volume("v", 8);
                b.variable(&VariableBuilder::new("w", DType::Int8, &["q"]));
                b
            },
            "unknown axis",
        ),
        (
            {
                let mut b = volume("v", 8);
                b.variable(VariableBuilder::new("w", DType::Int8, &["x"]).chunk(&[0]));
                b
            },
            "chunk extent",
        ),
        (
            {
                let mut b = volume("v", 8);
                b.variable(VariableBuilder::new("w", DType::Int8, &["x"]).chunk(&[2, 2]));
                b
            },
            "chunk extent for each",
        ),
        (
            {
                let mut b = volume("v", 8);
                b.variable(VariableBuilder::new("w", DType::UInt8, &["x"]).fill(-1));
                b
            },
            "fill value",
        ),
        (
            {
                let mut b = volume("v", 8);
                b.variable(VariableBuilder::new("w", DType::Float64, &["x", "y", "z"]).chunk(&[1024, 1024, 64]));
                b
            },
            "exceeds",
        ),
        (
            {
                let mut b = DatasetBuilder::new();
                b.axis(Axis::new("x", 0)).variable(&VariableBuilder::new("v", DType::Int8, &["x"]));
                b
            },
            "0 samples",
        ),
    ];
    for (b, want) in cases {
        let e = b.create(&p).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
        assert!(e.to_string().contains(want), "{e:?} should mention {want:?}");
        // Said as the builder's check says it, not as a head that fails to read back.
        assert!(!e.to_string().contains("read back"), "{e}");
        assert!(!p.exists(), "a refused description must not leave a file");
    }
}

/// Handles opened from the same descriptor bytes share its parsed form
/// until one of them changes it: a writer's uncommitted attributes, axis
/// sizes and slots stay its own.
#[test]
fn a_shared_descriptor_is_copied_by_the_handle_that_changes_it() {
    let dir = Scratch::new("shared-desc");
    let p = dir.path("s.vds");
    let mut b = DatasetBuilder::new();
    b.axis(Axis::new("x", 4).growable(None)).variable(VariableBuilder::new("v", DType::Int32, &["x"]).chunk(&[2])).attribute("a", 1);
    b.create(&p).unwrap().close().unwrap();
    let reader = Dataset::open(&p).unwrap();
    let mut writer = Dataset::open_rw(&p).unwrap();
    let second = Dataset::open(&p).unwrap();
    writer.set_attribute("a", Some(json!(2))).unwrap();
    writer.set_variable_attribute("v", "unit_note", Some(json!("m"))).unwrap();
    writer.resize_axis("x", 6).unwrap();
    writer.add_external_slot("s1.bin").unwrap();
    for ds in [&reader, &second] {
        assert_eq!(ds.attributes()["a"], json!(1));
        assert!(ds.variable_attributes("v").unwrap().is_empty());
        assert_eq!(ds.variable("v").unwrap().shape(), &[4]);
    }
    assert_eq!(writer.attributes()["a"], json!(2));
    assert_eq!(writer.variable("v").unwrap().shape(), &[6]);
    // A handle opened now, before the commit, reads the committed descriptor.
    let before = Dataset::open(&p).unwrap();
    assert_eq!(before.attributes()["a"], json!(1));
    writer.rollback().unwrap();
    assert_eq!(writer.attributes()["a"], json!(1));
    assert_eq!(writer.variable("v").unwrap().shape(), &[4]);
    writer.set_attribute("a", Some(json!(3))).unwrap();
    writer.close().unwrap();
    assert_eq!(reader.attributes()["a"], json!(1));
    assert_eq!(Dataset::open(&p).unwrap().attributes()["a"], json!(3));
}

#[test]
fn opening_and_reading_one_chunk_reads_a_few_pages_whatever_the_chunk_count() {
    use std::sync::atomic::Ordering;
    let mut reads_per_size = Vec::new();
    for n in [100u64, 10_000, 300_000] {
        let mem = vds::MemoryStorage::new();
        let mut ds = DatasetBuilder::new()
            .axis(Axis::new("x", n))
            .variable(VariableBuilder::new("v", DType::UInt32, &["x"]).chunk(&[1]))
            .create_in(std::sync::Arc::new(mem.clone()))
            .unwrap();
        // One chunk per element, each a different constant: n index entries.
        let values: Vec<u32> = (0..n as u32).collect();
        ds.write("v", &Region::full(&[n]).unwrap(), Order::C, &values).unwrap();
        ds.commit().unwrap();
        let counting = CountingStorage { inner: mem, ..Default::default() };
        let ds = vds::OpenOptions::new().open_storage(std::sync::Arc::new(counting.clone())).unwrap();
        let at_open = counting.reads.load(Ordering::Relaxed);
        let v: Vec<u32> = ds.read_vec("v", &Region::new(&[n - 1], &[1]).unwrap(), Order::C).unwrap();
        assert_eq!(v, vec![n as u32 - 1]);
        let total = counting.reads.load(Ordering::Relaxed);
        // Opening reads the head (which holds the slots and descriptor of a small file); a lookup one page per level.
        assert!(at_open <= 3, "opening read {at_open} times");
        reads_per_size.push((n, total));
    }
    // 100 entries: the whole file (under 64 KiB) comes with the head, one
    // read in all. 10000 and 300000: the reads grow with the depth, not the count.
    let (small, mid, large) = (reads_per_size[0].1, reads_per_size[1].1, reads_per_size[2].1);
    assert_eq!(small, 1, "{reads_per_size:?}");
    assert!(large <= mid + 1 && large <= 6, "{reads_per_size:?}");
}

/// With `index_prefetch`, opening reads the index above the leaves one
/// level per `read_many` batch; finding a chunk then reads its leaf only.
#[test]
fn index_prefetch_reads_the_upper_index_in_one_batch_per_level() {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    let n = 300_000u64;
    let mem = vds::MemoryStorage::new();
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", n))
        .variable(VariableBuilder::new("v", DType::UInt32, &["x"]).chunk(&[1]))
        .create_in(Arc::new(mem.clone()))
        .unwrap();
    let values: Vec<u32> = (0..n as u32).collect();
    ds.write("v", &Region::full(&[n]).unwrap(), Order::C, &values).unwrap();
    ds.commit().unwrap();
    let counted = Arc::new(CountingStorage { inner: mem, ..Default::default() });
    let ds = vds::OpenOptions::new().index_prefetch(512).open_storage(counted.clone()).unwrap();
    let (single, batches) = (counted.reads.load(Ordering::Relaxed), counted.batches.load(Ordering::Relaxed));
    // The head; then the root and the level below it (300000 entries: two levels above the leaves).
    assert!(single <= 3 && batches == 2, "opening: {single} reads and {batches} batches");
    for i in [0, n / 3, n - 1] {
        let before = counted.reads.load(Ordering::Relaxed);
        let v: Vec<u32> = ds.read_vec("v", &Region::new(&[i], &[1]).unwrap(), Order::C).unwrap();
        assert_eq!(v, vec![i as u32]);
        // One read, of the leaf (none when it lies in the first 64 KiB, read with the head).
        assert!(counted.reads.load(Ordering::Relaxed) - before <= 1, "finding chunk {i} read more than its leaf");
    }
}

#[test]
fn a_reader_keeps_a_small_files_body_yet_sees_new_commits_and_verifies_the_disk() {
    let dir = Scratch::new("prefix");
    let path = dir.path("p.vds");
    let full = Region::full(&[64]).unwrap();
    let first: Vec<i32> = (0..64).collect();
    let mut w = DatasetBuilder::new()
        .axis(Axis::new("x", 64))
        .variable(VariableBuilder::new("v", DType::Int32, &["x"]).chunk(&[16]))
        .create(&path)
        .unwrap();
    w.write("v", &full, Order::C, &first).unwrap();
    w.commit().unwrap();
    let mut r = vds::OpenOptions::new().open(&path).unwrap();
    assert_eq!(r.read_vec::<i32>("v", &full, Order::C).unwrap(), first);
    // A writer commits new chunks and a new descriptor (rewriting the head and the slots).
    let second: Vec<i32> = (0..64).map(|i| -i).collect();
    w.write("v", &Region::new(&[8], &[40]).unwrap(), Order::C, &second[8..48]).unwrap();
    w.set_attribute("k", Some(7.into())).unwrap();
    w.commit().unwrap();
    assert_eq!(r.read_vec::<i32>("v", &full, Order::C).unwrap(), first, "the reader's snapshot");
    assert!(r.refresh().unwrap());
    let mut want = first.clone();
    want[8..48].copy_from_slice(&second[8..48]);
    assert_eq!(r.read_vec::<i32>("v", &full, Order::C).unwrap(), want, "after refresh");
    assert_eq!(r.attributes()["k"], 7);
    drop(w);
    // Damage on disk to a chunk the reader holds in memory: verify reads the file.
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.windows(8).position(|x| x == [60, 0, 0, 0, 61, 0, 0, 0]).unwrap();
    bytes[at] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let report = r.verify().unwrap();
    assert!(!report.is_ok(), "verify must read the damaged file, not the copy");
    assert!(Dataset::open(&path).unwrap().read_vec::<i32>("v", &full, Order::C).is_err());
}

#[test]
fn overwriting_leaves_exactly_the_new_container_whatever_the_old_one_was() {
    let dir = Scratch::new("overwrite");
    let path = dir.path("o.vds");
    let mut rng = Rng::new(seed(7));
    let values: Vec<f64> = (0..24000).map(|_| rng.next() as f64).collect();
    let full = Region::full(&[40, 30, 20]).unwrap();
    let tiny = |path: &std::path::Path, value: i64| {
        let mut ds = DatasetBuilder::new()
            .overwrite(true)
            .axis(Axis::new("x", 1))
            .variable(&VariableBuilder::new("v", DType::Int64, &["x"]))
            .create(path)
            .unwrap();
        // Created: the old bytes beyond the new head and slots are no part of it.
        assert_eq!(Dataset::open(path).unwrap().read_vec::<i64>("v", &Region::full(&[1]).unwrap(), Order::C).unwrap(), [0]);
        ds.write("v", &Region::full(&[1]).unwrap(), Order::C, &[value]).unwrap();
        ds.close().unwrap();
        // Committed: the file is the same bytes as the container written afresh.
        let fresh = path.with_extension("fresh");
        let _ = std::fs::remove_file(&fresh);
        let mut ds = DatasetBuilder::new()
            .axis(Axis::new("x", 1))
            .variable(&VariableBuilder::new("v", DType::Int64, &["x"]))
            .create(&fresh)
            .unwrap();
        ds.write("v", &Region::full(&[1]).unwrap(), Order::C, &[value]).unwrap();
        ds.close().unwrap();
        assert!(std::fs::read(path).unwrap() == std::fs::read(&fresh).unwrap(), "overwritten with {value}: not the container alone");
    };
    // A large aligned container with stored chunks, overwritten by a tiny compact one,
    // then by the large one again, then by another tiny one over the tiny one.
    let mut big = volume("v", 10);
    big.layout(vds::Layout::Aligned);
    let mut ds = big.clone().create(&path).unwrap();
    ds.write("v", &full, Order::C, &values).unwrap();
    ds.close().unwrap();
    let big_len = std::fs::metadata(&path).unwrap().len();
    tiny(&path, 42);
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len < 1024 && len < big_len, "{len} bytes after overwriting {big_len}");
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.read_vec::<i64>("v", &Region::full(&[1]).unwrap(), Order::C).unwrap(), [42]);
    let report = ds.verify().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    drop(ds);
    let mut ds = big.overwrite(true).create(&path).unwrap();
    // The new container reads as the fill value, not as the old values.
    assert!(ds.read_vec::<f64>("v", &full, Order::C).unwrap().iter().all(|v| v.is_nan()));
    let reversed: Vec<f64> = values.iter().rev().copied().collect();
    ds.write("v", &full, Order::C, &reversed).unwrap();
    ds.close().unwrap();
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.read_vec::<f64>("v", &full, Order::C).unwrap(), reversed);
    assert!(ds.verify().unwrap().problems.is_empty());
    drop(ds);
    tiny(&path, 7);
    tiny(&path, -3);
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.read_vec::<i64>("v", &Region::full(&[1]).unwrap(), Order::C).unwrap(), [-3]);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), len, "the same tiny container, the same length");
}

#[test]
fn an_overwritten_file_is_cut_by_a_writer_that_commits_nothing_and_reads_after_a_crash() {
    let dir = Scratch::new("overwrite_uncommitted");
    let path = dir.path("u.vds");
    let full = Region::full(&[40, 30, 20]).unwrap();
    let one = Region::full(&[1]).unwrap();
    let big = || {
        let mut ds = volume("v", 10).overwrite(true).create(&path).unwrap();
        ds.write("v", &full, Order::C, &vec![5.0f64; 24000]).unwrap();
        ds.close().unwrap();
        std::fs::metadata(&path).unwrap().len()
    };
    let tiny = || {
        DatasetBuilder::new()
            .overwrite(true)
            .axis(Axis::new("x", 1))
            .variable(&VariableBuilder::new("v", DType::Int64, &["x"]))
            .create(&path)
            .unwrap()
    };
    let is_head_and_slots = |what: &str| {
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), body_start(&bytes), "{what}: not the new container's head and slots alone");
    };
    // Closed with nothing written, a commit with nothing to commit (as the C
    // API's close), dropped with an uncommitted write: each cuts the old bytes off.
    big();
    tiny().close().unwrap();
    is_head_and_slots("closed");
    big();
    let mut ds = tiny();
    ds.commit().unwrap();
    is_head_and_slots("committed nothing");
    drop(ds);
    let big_len = big();
    let mut ds = tiny();
    ds.write("v", &one, Order::C, &[3i64]).unwrap();
    // A writer that crashed here would leave this file: the new head and
    // slots, then the old container's bytes beyond the committed length.
    let crashed = std::fs::read(&path).unwrap();
    assert_eq!(crashed.len() as u64, big_len);
    drop(ds);
    is_head_and_slots("dropped");
    assert_eq!(Dataset::open(&path).unwrap().read_vec::<i64>("v", &one, Order::C).unwrap(), [0]);
    // The crashed file reads as the new container, and the next writer goes on from it.
    std::fs::write(&path, &crashed).unwrap();
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.read_vec::<i64>("v", &one, Order::C).unwrap(), [0]);
    assert!(ds.verify().unwrap().problems.is_empty());
    drop(ds);
    let mut ds = Dataset::open_rw(&path).unwrap();
    ds.write("v", &one, Order::C, &[9i64]).unwrap();
    ds.close().unwrap();
    let ds = Dataset::open(&path).unwrap();
    assert_eq!(ds.read_vec::<i64>("v", &one, Order::C).unwrap(), [9]);
    assert!(ds.verify().unwrap().problems.is_empty());
}

/// A store that reports, the first time it is asked, the length of the
/// longer file it was a moment ago: as a reader sees a file whose writer's
/// first commit cuts it between the reader's measuring and reading it.
struct ShrunkAfterMeasuring {
    inner: vds::MemoryStorage,
    stale: std::sync::atomic::AtomicU64,
}

impl vds::Storage for ShrunkAfterMeasuring {
    fn len(&self) -> std::io::Result<u64> {
        match self.stale.swap(0, std::sync::atomic::Ordering::SeqCst) {
            0 => self.inner.len(),
            stale => Ok(stale),
        }
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.inner.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.inner.write_at(offset, data)
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.inner.set_len(len)
    }
    fn sync(&self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_reader_opening_a_file_cut_after_it_measured_it_measures_again() {
    let mem = vds::MemoryStorage::new();
    let mut ds = DatasetBuilder::new()
        .axis(Axis::new("x", 1))
        .variable(&VariableBuilder::new("v", DType::Int64, &["x"]))
        .create_in(std::sync::Arc::new(mem.clone()))
        .unwrap();
    ds.write("v", &Region::full(&[1]).unwrap(), Order::C, &[7i64]).unwrap();
    ds.close().unwrap();
    let len = mem.to_bytes().len() as u64;
    // 100 KiB more than there is: the head search reads 64 KiB at once.
    let shrunk = ShrunkAfterMeasuring { inner: mem, stale: (len + (100 << 10)).into() };
    let ds = vds::OpenOptions::new().open_storage(std::sync::Arc::new(shrunk)).unwrap();
    assert_eq!(ds.read_vec::<i64>("v", &Region::full(&[1]).unwrap(), Order::C).unwrap(), [7]);
}

#[test]
fn a_reader_refreshed_after_the_path_was_overwritten_reads_the_new_container() {
    let dir = Scratch::new("overwrite_reader");
    let path = dir.path("r.vds");
    let full = Region::full(&[40, 30, 20]).unwrap();
    let write = |value: f64, commits: usize| {
        let mut ds = volume("v", 10).overwrite(true).create(&path).unwrap();
        for c in 0..commits {
            ds.write("v", &full, Order::C, &vec![value + c as f64; 24000]).unwrap();
            ds.commit().unwrap();
        }
        ds.close().unwrap();
        value + (commits - 1) as f64
    };
    // The reader keeps the small container's body in memory; the container is then
    // replaced by one with fewer commits, and by one with more than it had.
    let first = write(1.0, 3);
    let mut reader = Dataset::open(&path).unwrap();
    assert!(reader.read_vec::<f64>("v", &full, Order::C).unwrap().iter().all(|&v| v == first));
    for (value, commits) in [(100.0, 1), (200.0, 6)] {
        let last = write(value, commits);
        assert!(reader.refresh().unwrap());
        let got: Vec<f64> = reader.read_vec("v", &full, Order::C).unwrap();
        assert!(got.iter().all(|&v| v == last), "after overwriting with {commits} commits: {:?}", &got[..3]);
        assert!(reader.verify().unwrap().problems.is_empty());
    }
}

/// Containers of one description share the head made first; one that
/// differs anywhere, down to the sign of a zero, gets its own.
#[test]
fn each_container_gets_the_head_of_its_own_description() {
    let dir = Scratch::new("heads");
    let made = |name: &str, fill: f64, first: f64, attr: vds::serde_json::Value| {
        let mut b = DatasetBuilder::new();
        b.axis(Axis::new("x", 4).coordinates(first, 3.0));
        b.variable(VariableBuilder::new("v", DType::Float64, &["x"]).fill(fill).attribute("a", attr));
        let path = dir.path(name);
        b.create(&path).unwrap().close().unwrap();
        let (_, desc) = head_lines(&path);
        // The descriptor's text (a JSON value compares -0.0 equal to 0.0).
        let text = vds::serde_json::to_string(&desc).unwrap();
        let ds = Dataset::open(&path).unwrap();
        let v = &ds.variables()[0];
        let fill = match v.fill_value() {
            vds::Scalar::Float(x) => x,
            other => panic!("a float64 fill value, not {other:?}"),
        };
        (text, desc, fill, ds.axes()[0].first())
    };
    let (first, ..) = made("a.vds", 0.0, 0.0, json!(1.5));
    let (again, ..) = made("b.vds", 0.0, 0.0, json!(1.5));
    assert_eq!(first, again);
    for (name, fill, start, attr) in [
        ("c.vds", -0.0, 0.0, json!(1.5)),
        ("d.vds", 0.0, -0.0, json!(1.5)),
        ("e.vds", 0.0, 0.0, json!(1)),
        ("f.vds", 0.0, 0.0, json!([1.5])),
    ] {
        let (text, desc, got_fill, got_first) = made(name, fill, start, attr.clone());
        assert_ne!(text, first, "{name}");
        assert_eq!(desc["variables"][0]["attributes"]["a"], attr, "{name}");
        assert_eq!(got_fill.to_bits(), fill.to_bits(), "{name}");
        assert_eq!(got_first.to_bits(), start.to_bits(), "{name}");
    }
}

#[test]
fn a_slot_or_a_resize_the_descriptor_would_not_read_back_with_is_refused() {
    // A descriptor filled to its memory limit by an attribute: a change that lengthens it
    // otherwise (a slot listed, an axis's numbers longer) is refused as an attribute would be,
    // and what was committed opens again with that limit.
    let dir = Scratch::new("full-desc");
    let path = dir.path("f.vds");
    let mut b = DatasetBuilder::new();
    b.axis(Axis::new("g", 4).growable(None)).variable(VariableBuilder::new("v", DType::Int8, &["g"]).chunk(&[4]));
    b.create(&path).unwrap().close().unwrap();
    let limit = 60_000;
    let mut o = vds::OpenOptions::new();
    o.memory_limit(limit).write(true);
    let mut ds = o.open(&path).unwrap();
    // The longest padding the limit takes.
    let (mut lo, mut hi) = (0usize, 20_000usize);
    while lo + 1 < hi {
        let mid = (lo + hi) / 2;
        if ds.set_attribute("pad", Some(json!("s".repeat(mid)))).is_ok() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    ds.set_attribute("pad", Some(json!("s".repeat(lo)))).unwrap();
    let e = ds.add_external_slot("extra.dat").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.to_string().contains("would not read back"), "{e}");
    assert!(!dir.path("extra.dat").exists(), "no slot file is left behind");
    let e = ds.resize_axis("g", 3_456_789_012).unwrap_err();
    assert!(e.to_string().contains("would not read back"), "{e}");
    assert_eq!(ds.variable("v").unwrap().shape(), [4]);
    ds.close().unwrap();
    let ds = o.write(false).open(&path).unwrap();
    assert_eq!(ds.attributes()["pad"], json!("s".repeat(lo)));
}
