//! A container served by nginx reads remotely exactly as it reads locally:
//! every layer kind (levels of detail, tiles, quantized, masked, margins,
//! bool, constant and unwritten chunks) and an external-file slot fetched
//! from the URL next to the container's. nginx runs on a loopback port,
//! started and stopped here. Behind a proxy that drops, delays, truncates
//! or fails requests (the ones it is told to, or a share of all of them),
//! transient faults are retried and reads still match, and lasting ones
//! fail as I/O errors naming the URL and byte range.

#[path = "remote_common/mod.rs"]
mod common;

use common::{assert_names_url_and_range, compare, every_layer, nginx, noise, ConnectionCounter, Fault, FaultProxy, TempDir};
use std::time::Duration;
use vds::{Dataset, ErrorKind, Order, Region};

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

#[test]
fn opens_of_one_server_share_a_client_and_its_connections() {
    // Each open fetches the head and the tail at once, on two connections;
    // opens after the first reuse them (nginx keeps them alive), where a
    // client per open would connect twice each time.
    let www = TempDir::new("shared");
    let values = noise(&www.0.join("noise.vds"), 32, 16);
    let server = nginx(&www.0);
    let counter = ConnectionCounter::start(server.port);
    let url = format!("http://127.0.0.1:{}/noise.vds", counter.port);
    let full = Region::full(&[32, 32, 32]).unwrap();
    let opens = 6;
    for _ in 0..opens {
        let remote = vds::remote::open(&url).unwrap();
        assert!(remote.read_vec::<u32>("noise", &full, Order::C).unwrap() == values);
    }
    let connections = counter.connections.load(std::sync::atomic::Ordering::SeqCst);
    assert!((1..=4).contains(&connections), "{opens} opens and reads made {connections} connections");
}

/// A quarter of all requests fail (a 503, a dropped connection, a body cut
/// in half, a short delay, in turn; a retry is never failed again, so that
/// the test does not depend on how retries interleave): every layer kind
/// still reads as the local file.
#[test]
fn a_quarter_of_requests_failing_still_reads_every_layer() {
    let www = TempDir::new("share");
    let path = every_layer(&www.0, "survey.vds");
    let server = nginx(&www.0);
    let proxy = FaultProxy::start(server.port);
    proxy.fail_share(4, &[Fault::Status(503), Fault::Drop, Fault::Truncate, Fault::Delay(Duration::from_millis(50))]);
    let url = format!("http://127.0.0.1:{}/survey.vds", proxy.port);
    let remote = vds::remote::open(&url).unwrap();
    compare(&Dataset::open(&path).unwrap(), &remote);
    let (requests, failed) =
        (proxy.requests.load(std::sync::atomic::Ordering::SeqCst), proxy.failed.load(std::sync::atomic::Ordering::SeqCst));
    eprintln!("{requests} requests, {failed} of them failed by the proxy");
    // Every fourth request fails unless it is a retry of one that failed: about a fifth of them.
    assert!(failed >= 3 && failed * 8 >= requests, "{failed} of {requests} requests failed");
}

#[test]
fn nginx_behind_a_failing_proxy_is_read_correctly_or_reported() {
    let www = TempDir::new("proxied");
    let path = every_layer(&www.0, "survey.vds");
    let values = noise(&www.0.join("noise.vds"), 64, 16);
    let server = nginx(&www.0);
    let proxy = FaultProxy::start(server.port);
    let url = |name: &str| format!("http://127.0.0.1:{}/{name}", proxy.port);

    // Each fault hits one request; every request may be retried four times.
    let transient = [Fault::Drop, Fault::Status(503), Fault::Truncate, Fault::Status(500), Fault::Delay(Duration::from_millis(50))];
    proxy.inject(&transient);
    let remote = vds::remote::open(&url("survey.vds")).unwrap();
    compare(&Dataset::open(&path).unwrap(), &remote);
    assert_eq!(proxy.pending(), 0, "every fault was met");
    let full = Region::full(&[64, 64, 64]).unwrap();
    let remote = vds::remote::open(&url("noise.vds")).unwrap();
    proxy.inject(&transient);
    assert!(remote.read_vec::<u32>("noise", &full, Order::C).unwrap() == values);
    assert_eq!(proxy.pending(), 0, "every fault was met");

    // Lasting failures, on a fresh open (nothing cached).
    for lasting in [Fault::Status(503), Fault::Truncate, Fault::Drop] {
        let remote = vds::remote::open(&url("noise.vds")).unwrap();
        proxy.inject(&[lasting; 200]);
        let e = remote.read_vec::<u32>("noise", &full, Order::C).map(|v| v.len()).unwrap_err();
        assert_names_url_and_range(&e, &url("noise.vds"));
        proxy.clear();
    }
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
