//! The commands that read a container (info, verify, dump, slice, export,
//! copy) take an http:// URL as they take a path, and print and write the
//! same as for the local file; import and copy publish to an s3:// URL. The
//! servers, on loopback ports, are the library's remote test server and moto's
//! S3 server.

#[path = "../../tests/remote_common/mod.rs"]
mod common;

use common::{create_bucket, every_layer, moto, FaultServer, TempDir};
use std::path::Path;
use std::process::Command;

fn vds(dir: &Path, args: &[&str]) -> (bool, Vec<u8>, String) {
    vds_env(dir, args, &[])
}

fn vds_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (bool, Vec<u8>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vds"))
        .args(args)
        .current_dir(dir)
        .env_remove("VDS_PROGRESS")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    (out.status.success(), out.stdout, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let (success, stdout, stderr) = vds(dir, args);
    assert!(success, "vds {args:?} failed: {stderr}");
    String::from_utf8(stdout).unwrap()
}

#[test]
fn reading_commands_take_urls() {
    let dir = TempDir::new("tool");
    let d = &dir.0;
    every_layer(d, "s.vds");
    let server = FaultServer::start();
    for name in ["s.vds", "s.vds.data"] {
        server.put(name, std::fs::read(d.join(name)).unwrap());
    }
    let url = server.url("s.vds");

    let local = ok(d, &["info", "s.vds"]);
    let remote = ok(d, &["info", &url]);
    assert_eq!(remote.replace(&url, "s.vds"), local);
    assert!(ok(d, &["verify", &url]).contains("intact"));
    let region = "2:5,0:24,10:12";
    assert_eq!(ok(d, &["dump", &url, "masked", "--region", region]), ok(d, &["dump", "s.vds", "masked", "--region", region]));
    for (src, out) in [("s.vds", "local"), (url.as_str(), "remote")] {
        ok(d, &["slice", src, "amplitude", "--axis", "time", "--index", "7", "-o", &format!("{out}.png")]);
        ok(d, &["export", src, &format!("{out}.npy"), "outside", "--quiet"]);
        ok(d, &["copy", src, &format!("{out}-copy.vds"), "--quiet"]);
    }
    for (a, b) in [("local.png", "remote.png"), ("local.npy", "remote.npy")] {
        assert!(std::fs::read(d.join(a)).unwrap() == std::fs::read(d.join(b)).unwrap(), "{a} and {b} differ");
    }
    assert_eq!(
        ok(d, &["dump", "remote-copy.vds", "outside", "--region", region]),
        ok(d, &["dump", "s.vds", "outside", "--region", region])
    );

    // A URL that does not answer: one line naming it, exit status 1.
    let gone = format!("http://127.0.0.1:{}/s.vds", common::free_port());
    let (success, _, stderr) = vds(d, &["info", &gone]);
    assert!(!success && stderr.contains(&gone) && stderr.lines().count() == 1, "{stderr}");
}

#[test]
fn import_and_copy_publish_to_s3() {
    let server = moto();
    let dir = TempDir::new("tool-s3");
    let d = &dir.0;
    every_layer(d, "s.vds");
    create_bucket(server.port, "tool-bucket");
    let endpoint = format!("http://127.0.0.1:{}", server.port);
    let env =
        [("AWS_ENDPOINT_URL", endpoint.as_str()), ("AWS_ACCESS_KEY_ID", "k"), ("AWS_SECRET_ACCESS_KEY", "s"), ("AWS_REGION", "us-east-1")];
    let run = |args: &[&str]| {
        let (success, stdout, stderr) = vds_env(d, args, &env);
        assert!(success, "vds {args:?} failed: {stderr}");
        String::from_utf8(stdout).unwrap()
    };
    let said = run(&["copy", "s.vds", "s3://tool-bucket/c/s.vds", "--quiet"]);
    assert!(said.starts_with("s3://tool-bucket/c/s.vds: "), "{said}");
    // The copy folded the slot in: it reads alone, with the same values.
    assert!(run(&["verify", "s3://tool-bucket/c/s.vds"]).contains("intact"));
    for var in ["amplitude", "outside", "masked"] {
        assert_eq!(
            run(&["dump", "s3://tool-bucket/c/s.vds", var, "--region", "1:3,5:7,100:104"]),
            ok(d, &["dump", "s.vds", var, "--region", "1:3,5:7,100:104"])
        );
    }
    // No silent replacement.
    let (success, _, stderr) = vds_env(d, &["copy", "s.vds", "s3://tool-bucket/c/s.vds", "--quiet"], &env);
    assert!(!success && stderr.contains("already exists"), "{stderr}");
    run(&["copy", "s.vds", "s3://tool-bucket/c/s.vds", "--quiet", "--force"]);

    let npy = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/survey.npy");
    let npy = npy.display().to_string();
    run(&["import", &npy, "s3://tool-bucket/survey.vds", "--axes", "inline,crossline,time", "--quiet"]);
    ok(d, &["import", &npy, "survey.vds", "--axes", "inline,crossline,time", "--quiet"]);
    run(&["export", "s3://tool-bucket/survey.vds", "remote.npy", "--quiet"]);
    ok(d, &["export", "survey.vds", "local.npy", "--quiet"]);
    assert!(std::fs::read(d.join("remote.npy")).unwrap() == std::fs::read(d.join("local.npy")).unwrap());
}
