//! A container served by nginx reads remotely exactly as it reads locally:
//! every layer kind (levels of detail, tiles, quantized, masked, margins,
//! bool, constant and unwritten chunks) and an external-file slot fetched
//! from the URL next to the container's. nginx runs on a loopback port,
//! started and stopped here.

#[path = "remote_common/mod.rs"]
mod common;

use common::{compare, every_layer, nginx, TempDir};
use vds::{Dataset, ErrorKind};

#[test]
fn every_layer_kind_reads_the_same_over_http() {
    let www = TempDir::new("www");
    std::fs::create_dir(www.0.join("surveys")).unwrap();
    let path = every_layer(&www.0.join("surveys"), "every layer.vds");
    let server = nginx(&www.0);
    let local = Dataset::open(&path).unwrap();
    let url = format!("http://127.0.0.1:{}/surveys/every%20layer.vds", server.port);
    let remote = vds::remote::open(&url).unwrap();
    compare(&local, &remote);

    // A missing object is NotFound, naming the URL.
    let missing = format!("http://127.0.0.1:{}/surveys/none.vds", server.port);
    let e = vds::remote::open(&missing).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    assert!(e.to_string().contains(&missing), "{e}");
}

/// The module docs' example is examples/remote_open.rs verbatim (which `cargo test` builds).
#[test]
fn the_module_docs_example_is_examples_remote_open_rs() {
    let root = env!("CARGO_MANIFEST_DIR");
    let docs: String = std::fs::read_to_string(format!("{root}/src/remote.rs"))
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| format!("{}\n", l.strip_prefix(' ').unwrap_or(l)))
        .collect();
    let example = std::fs::read_to_string(format!("{root}/examples/remote_open.rs")).unwrap();
    assert!(docs.contains(&format!("```no_run\n{example}```")), "copy examples/remote_open.rs into the module docs of src/remote.rs");
}
