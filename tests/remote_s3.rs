//! A container in an S3 bucket (moto's server, on a loopback port, started
//! and stopped here) reads remotely exactly as it reads locally, its
//! external-file slot fetched from the key next to the container's; the
//! endpoint and credentials come from the standard AWS_* variables.
//! Publishing uploads a container (in parts when large) that then reads
//! back the same, and a reader that opened the object before it was
//! replaced is told so instead of mixing the two. Requests go through a
//! proxy that drops, delays, truncates or fails the ones it is told to:
//! transient faults are retried, lasting ones reported.

#[path = "remote_common/mod.rs"]
mod common;

use common::{assert_names_url_and_range, compare, create_bucket, every_layer, moto, noise, Fault, FaultProxy, TempDir};
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStoreExt, PutPayload};
use std::time::Duration;
use vds::{Dataset, ErrorKind, Order, Region};

#[test]
fn every_layer_kind_reads_the_same_from_s3() {
    let server = moto();
    // Every request goes through a proxy that fails the ones it is told to.
    let proxy = FaultProxy::start(server.port);
    let endpoint = format!("http://127.0.0.1:{}", proxy.port);
    // Set before any other thread of this process starts: this file has one test.
    std::env::set_var("AWS_ENDPOINT_URL", &endpoint);
    std::env::set_var("AWS_ACCESS_KEY_ID", "testing");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "testing");
    std::env::set_var("AWS_REGION", "us-east-1");
    create_bucket(server.port, "surveys");

    let dir = TempDir::new("s3");
    let path = every_layer(&dir.0, "survey.vds");
    let store = AmazonS3Builder::from_env().with_bucket_name("surveys").with_allow_http(true).build().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    for name in ["survey.vds", "survey.vds.data"] {
        let bytes = std::fs::read(dir.0.join(name)).unwrap();
        rt.block_on(store.put(&ObjectPath::from(format!("2026/{name}")), PutPayload::from(bytes))).unwrap();
    }

    let local = Dataset::open(&path).unwrap();
    let remote = vds::remote::open("s3://surveys/2026/survey.vds").unwrap();
    compare(&local, &remote);

    let e = vds::remote::open("s3://surveys/2026/absent.vds").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    assert!(e.to_string().contains("s3://surveys/2026/absent.vds"), "{e}");

    // Publishing: 8 MiB of values in parts of 5 MiB (S3's smallest).
    let big = dir.0.join("big.vds");
    let values = noise(&big, 128, 32);
    let full = Region::full(&[128, 128, 128]).unwrap();
    // Beside survey.vds.data, which the container published over it next needs.
    let url = "s3://surveys/2026/big.vds";
    assert!(!vds::remote::exists(url).unwrap());
    let sent = vds::remote::publish_in_parts(&big, url, 5 << 20).unwrap();
    assert_eq!(sent, std::fs::metadata(&big).unwrap().len());
    assert!(vds::remote::exists(url).unwrap());
    let before = vds::remote::open(url).unwrap();
    assert!(before.read_vec::<u32>("noise", &full, Order::C).unwrap() == values);

    // Replaced while `stale` has it open: `stale` refuses to mix the two.
    let stale = vds::remote::open(url).unwrap();
    vds::remote::publish(&path, url).unwrap();
    let e = stale.read_vec::<u32>("noise", &full, Order::C).map(|v| v.len()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    assert!(e.to_string().contains("changed since it was opened"), "{e}");
    compare(&local, &vds::remote::open(url).unwrap_or_else(|e| panic!("{e}")));

    // Only s3:// destinations, and only containers.
    assert_eq!(vds::remote::publish(&path, "http://127.0.0.1:1/x.vds").unwrap_err().kind(), ErrorKind::InvalidArgument);
    let not = dir.0.join("not.vds");
    std::fs::write(&not, b"hello\n").unwrap();
    assert_eq!(vds::remote::publish(&not, "s3://surveys/not.vds").unwrap_err().kind(), ErrorKind::Corrupt);
    assert!(!vds::remote::exists("s3://surveys/not.vds").unwrap());

    // Transient faults are retried and the reads match; lasting ones are
    // I/O errors naming the URL and the byte range.
    let (big_url, survey_url) = ("s3://surveys/2026/big.vds", "s3://surveys/2026/survey.vds");
    vds::remote::publish(&big, big_url).unwrap();
    proxy.inject(&[Fault::Drop, Fault::Status(503), Fault::Truncate, Fault::Status(500), Fault::Delay(Duration::from_millis(50))]);
    compare(&local, &vds::remote::open(survey_url).unwrap());
    let remote = vds::remote::open(big_url).unwrap();
    proxy.inject(&[Fault::Truncate, Fault::Drop, Fault::Status(503), Fault::Truncate]);
    assert!(remote.read_vec::<u32>("noise", &full, Order::C).unwrap() == values);
    assert_eq!(proxy.pending(), 0, "every fault was met");
    let remote = vds::remote::open(big_url).unwrap();
    proxy.inject(&[Fault::Status(503); 200]);
    let e = remote.read_vec::<u32>("noise", &full, Order::C).map(|v| v.len()).unwrap_err();
    assert_names_url_and_range(&e, big_url);
    proxy.clear();
}
