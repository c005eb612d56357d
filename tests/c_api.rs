//! The C ABI as C and C++ programs see it: include/vds.h is what cbindgen
//! makes of src/ffi; the exported symbols match the committed snapshot; the
//! header compiles alone as C99 and C++17; the C test program (every
//! function, every bad input) passes against the shared and the static
//! library and under valgrind; the C++ RAII example runs; the pkg-config
//! install works; every exported function catches panics.
//!
//! `VDS_UPDATE_ABI=1 cargo test --release --test c_api` rewrites
//! include/vds.h and tests/abi/symbols.txt: an intended ABI change is then a
//! visible diff (and, if it breaks the ABI, a soname bump in build.rs).

mod common;
use common::{libs, run, Scratch};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn updating() -> bool {
    std::env::var_os("VDS_UPDATE_ABI").is_some()
}

/// Compiles `sources` with the system C (or C++) compiler into `out` in a scratch dir.
fn compile(out: &Path, sources: &[PathBuf], cpp: bool, extra: &[&str]) {
    let (cc, std) = if cpp {
        (std::env::var("CXX").unwrap_or("c++".into()), "-std=c++17")
    } else {
        (std::env::var("CC").unwrap_or("cc".into()), "-std=c99")
    };
    let mut cmd = Command::new(cc);
    cmd.args([std, "-Wall", "-Wextra", "-pedantic", "-Werror", "-g", "-O1"])
        .arg("-I")
        .arg(root().join("include"))
        .arg("-I")
        .arg(root().join("cbindings"));
    cmd.args(sources).arg("-o").arg(out).args(extra);
    run(&mut cmd);
}

fn shared_link_args() -> Vec<String> {
    vec![format!("-L{}", libs().display()), "-lvds".into(), "-pthread".into()]
}

fn static_link_args() -> Vec<String> {
    // What the Rust standard library needs from the system, as `cargo rustc -- --print native-static-libs` lists it.
    let mut v = vec![libs().join("libvds.a").display().to_string()];
    v.extend(["-lgcc_s", "-lutil", "-lrt", "-lpthread", "-lm", "-ldl", "-lc"].map(String::from));
    v
}

/// Runs a compiled program with the shared library on its path.
fn run_program(exe: &Path, args: &[&Path], wrapper: &[&str]) -> String {
    let mut cmd = if wrapper.is_empty() { Command::new(exe) } else { Command::new(wrapper[0]) };
    if !wrapper.is_empty() {
        cmd.args(&wrapper[1..]).arg(exe);
    }
    cmd.args(args).env("LD_LIBRARY_PATH", libs());
    String::from_utf8_lossy(&run(&mut cmd).stdout).into_owned()
}

/// The C test program, compiled once per linkage.
fn c_test(linkage: &str) -> PathBuf {
    static BUILT: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let exe = libs().join(format!("test_vds_{linkage}"));
    let mut built = BUILT.lock().unwrap();
    if !built.contains(&linkage.to_string()) {
        let args = if linkage == "shared" { shared_link_args() } else { static_link_args() };
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let sources = [root().join("cbindings/test_vds.c"), root().join("cbindings/test_vds_layers.c")];
        compile(&exe, &sources, false, &args);
        built.push(linkage.into());
    }
    exe
}

fn assert_passed(output: &str) {
    assert!(output.contains("vds C test: all") && output.contains("checks passed"), "{output}");
}

#[test]
fn c_test_passes_against_the_shared_library() {
    let dir = Scratch::new("c-shared");
    assert_passed(&run_program(&c_test("shared"), &[dir.dir()], &[]));
}

#[test]
fn c_test_passes_against_the_static_library() {
    let dir = Scratch::new("c-static");
    let exe = c_test("static");
    // The static build must not need libvds.so at run time.
    let ldd = run(Command::new("ldd").arg(&exe));
    assert!(!String::from_utf8_lossy(&ldd.stdout).contains("libvds"), "the static test binary links libvds.so");
    assert_passed(&run_program(&exe, &[dir.dir()], &[]));
}

#[test]
fn c_test_is_clean_under_valgrind() {
    let dir = Scratch::new("c-valgrind");
    let wrapper = [
        "valgrind",
        "--quiet",
        "--error-exitcode=3",
        "--leak-check=full",
        "--show-leak-kinds=definite,indirect",
        "--errors-for-leak-kinds=definite,indirect",
    ];
    assert_passed(&run_program(&c_test("shared"), &[dir.dir()], &wrapper));
}

#[test]
fn the_header_compiles_alone_as_c99_and_cpp17() {
    let dir = Scratch::new("headertest");
    let src = dir.path("headertest.c");
    std::fs::write(&src, "#include \"vds.h\"\nint main(void) { return VDS_VERSION_NUMBER < 0 || VDS_OK != 0; }\n").unwrap();
    compile(&dir.path("headertest-c"), std::slice::from_ref(&src), false, &["-c"]);
    let cpp = dir.path("headertest.cpp");
    std::fs::copy(&src, &cpp).unwrap();
    compile(&dir.path("headertest-cpp"), &[cpp], true, &["-c"]);
    let hpp = dir.path("hpptest.cpp");
    std::fs::write(&hpp, "#include \"vds.hpp\"\nint main() { return 0; }\n").unwrap();
    compile(&dir.path("hpptest"), &[hpp], true, &["-c"]);
}

#[test]
fn cpp_example_runs() {
    let dir = Scratch::new("cpp");
    let exe = libs().join("example_cpp");
    let args = shared_link_args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    compile(&exe, &[root().join("cbindings/example.cpp")], true, &args);
    let out = run_program(&exe, &[&dir.path("example.vds")], &[]);
    assert!(out.contains("example: read back and verified"), "{out}");
}

#[test]
fn the_committed_header_is_what_cbindgen_generates() {
    let config = cbindgen::Config::from_file(root().join("cbindgen.toml")).unwrap();
    // Only src/ffi is parsed: the crate's other public items are not part of the C API.
    let builder = cbindgen::Builder::new().with_config(config);
    // mod.rs: cbindgen follows its `mod` declarations into the other files.
    let builder = builder.with_src(root().join("src/ffi/mod.rs"));
    let bindings = builder.generate().expect("cbindgen failed on src/ffi");
    let mut generated = Vec::new();
    bindings.write(&mut generated);
    let path = root().join("include/vds.h");
    if updating() {
        std::fs::write(&path, &generated).unwrap();
    }
    let committed = std::fs::read(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "include/vds.h differs from what cbindgen generates from src/ffi; regenerate it with: VDS_UPDATE_ABI=1 cargo test --release --test c_api"
    );
    // The version macros are the crate's version.
    let header = String::from_utf8(committed).unwrap();
    for (name, value) in
        [("MAJOR", env!("CARGO_PKG_VERSION_MAJOR")), ("MINOR", env!("CARGO_PKG_VERSION_MINOR")), ("PATCH", env!("CARGO_PKG_VERSION_PATCH"))]
    {
        assert!(header.contains(&format!("#define VDS_VERSION_{name} {value}\n")), "cbindgen.toml's VDS_VERSION_{name} must be {value}");
    }
}

#[test]
fn exported_symbols_match_the_snapshot_and_the_soname_is_versioned() {
    let so = libs().join("libvds.so");
    let nm = run(Command::new("nm").args(["-D", "--defined-only"]).arg(&so));
    let mut symbols: Vec<String> = String::from_utf8_lossy(&nm.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .filter(|s| s.starts_with("vds_"))
        .map(String::from)
        .collect();
    symbols.sort();
    let text = symbols.join("\n") + "\n";
    let path = root().join("tests/abi/symbols.txt");
    if updating() {
        std::fs::write(&path, &text).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert_eq!(committed, text, "the exported vds_* symbols changed; if intended: VDS_UPDATE_ABI=1 cargo test --release --test c_api");
    // The header declares exactly the exported functions.
    let header = std::fs::read_to_string(root().join("include/vds.h")).unwrap();
    let mut declared: Vec<String> = header
        .lines()
        .filter(|l| !l.trim_start().starts_with(['*', '/', '#']))
        .flat_map(|l| {
            l.match_indices("vds_").filter_map(move |(at, _)| {
                let name: String = l[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                l[at + name.len()..].starts_with('(').then_some(name)
            })
        })
        .collect();
    declared.sort();
    declared.dedup();
    assert_eq!(declared, symbols, "the functions declared in include/vds.h and those exported by libvds.so differ");
    let readelf = run(Command::new("readelf").arg("-d").arg(&so));
    assert!(String::from_utf8_lossy(&readelf.stdout).contains("[libvds.so.0]"), "libvds.so has no soname libvds.so.0");
}

#[test]
fn every_exported_function_is_inside_the_panic_boundary() {
    let mut count = 0;
    for entry in std::fs::read_dir(root().join("src/ffi")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        for (i, _) in text.match_indices("#[no_mangle]") {
            let rest = &text[i..];
            let open = rest.find('{').unwrap();
            let body = rest[open + 1..].trim_start();
            let name = rest.split("fn ").nth(1).unwrap().split('(').next().unwrap();
            assert!(
                body.starts_with("ffi_boundary!(") || body.starts_with("ffi_infallible!("),
                "{} has exported fn {name} whose body is not wrapped in ffi_boundary! or ffi_infallible!",
                path.display()
            );
            if body.starts_with("ffi_boundary!(") {
                assert!(body.starts_with(&format!("ffi_boundary!(\"{name}\"")), "{name} must name itself in ffi_boundary!");
            }
            count += 1;
        }
    }
    assert!(count >= 30, "only {count} exported functions found");
}

#[test]
fn pkg_config_install_builds_and_runs_a_program() {
    let dir = Scratch::new("install");
    let prefix = dir.path("prefix");
    run(Command::new("sh").arg(root().join("cbindings/install.sh")).arg(&prefix).env("VDS_BUILD_DIR", libs()));
    for f in [
        "lib/libvds.so.0.1.0",
        "lib/libvds.so.0",
        "lib/libvds.so",
        "lib/libvds.a",
        "include/vds.h",
        "include/vds.hpp",
        "lib/pkgconfig/vds.pc",
    ] {
        assert!(prefix.join(f).exists(), "install did not create {f}");
    }
    let pc = run(Command::new("pkg-config").args(["--cflags", "--libs", "vds"]).env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig")));
    let flags = String::from_utf8_lossy(&pc.stdout).into_owned();
    let app = dir.path("app.c");
    std::fs::write(
        &app,
        "#include <vds.h>\n#include <stdio.h>\nint main(void) { printf(\"libvds %s\\n\", vds_version()); return vds_version_number() == VDS_VERSION_NUMBER ? 0 : 1; }\n",
    )
    .unwrap();
    let mut cmd = Command::new(std::env::var("CC").unwrap_or("cc".into()));
    cmd.arg(&app).arg("-o").arg(dir.path("app")).args(flags.split_whitespace());
    run(&mut cmd);
    let out = run(Command::new(dir.path("app")).env("LD_LIBRARY_PATH", prefix.join("lib")));
    assert_eq!(String::from_utf8_lossy(&out.stdout), format!("libvds {}\n", env!("CARGO_PKG_VERSION")));
    // The README's C example, built exactly as its comment says.
    let mut cmd = Command::new(std::env::var("CC").unwrap_or("cc".into()));
    cmd.args(["-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror"])
        .arg(root().join("cbindings/example.c"))
        .arg("-o")
        .arg(dir.path("example"));
    run(cmd.args(flags.split_whitespace()));
    let out = run(Command::new(dir.path("example")).arg(dir.path("grid.vds")).env("LD_LIBRARY_PATH", prefix.join("lib")));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "row 42 starts 1200.0000 1200.1429, ends 1228.4286\n");
}

/// A C program that opens a container by URL with `vds_open`, reads all of
/// variable 0 as uint32 and compares it with the same read of the local
/// file; asking to write through the URL is `VDS_ERR_READ_ONLY`, and a URL
/// with nothing behind it fails with a message naming it.
#[cfg(feature = "remote")]
const URL_PROGRAM: &str = r#"#include <vds.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int read_all(const char *path, uint64_t n, uint32_t *buf) {
    vds_dataset *ds = NULL;
    uint64_t start[3] = {0, 0, 0}, shape[3] = {n, n, n};
    if (vds_open(path, VDS_OPEN_READ, &ds) != VDS_OK) { fprintf(stderr, "open %s: %s\n", path, vds_last_error_message()); return 1; }
    if (vds_read(ds, 0, VDS_UINT32, start, shape, NULL, 3, VDS_ORDER_C, (uint8_t *)buf, n * n * n * 4) != VDS_OK) {
        fprintf(stderr, "read %s: %s\n", path, vds_last_error_message());
        return 1;
    }
    return vds_close(ds) != VDS_OK;
}

int main(int argc, char **argv) {
    vds_dataset *ds = NULL;
    vds_status s;
    uint64_t n;
    uint32_t *remote, *local;
    if (argc != 5) return 2;
    n = strtoull(argv[3], NULL, 10);
    remote = malloc(n * n * n * 4);
    local = malloc(n * n * n * 4);
    if (!remote || !local) return 2;
    if (read_all(argv[1], n, remote) || read_all(argv[2], n, local)) return 1;
    if (memcmp(remote, local, n * n * n * 4) != 0) { fprintf(stderr, "the remote values differ from the local ones\n"); return 1; }
    s = vds_open(argv[1], VDS_OPEN_WRITE, &ds);
    if (s != VDS_ERR_READ_ONLY) { fprintf(stderr, "writing by URL: %s\n", vds_status_str(s)); return 1; }
    s = vds_open(argv[4], VDS_OPEN_READ, &ds);
    if (s == VDS_OK || strstr(vds_last_error_message(), argv[4]) == NULL) { fprintf(stderr, "missing object: %s: %s\n", vds_status_str(s), vds_last_error_message()); return 1; }
    printf("%llu values read by URL; missing object: %s\n", (unsigned long long)(n * n * n), vds_status_str(s));
    free(remote);
    free(local);
    return 0;
}
"#;

/// The servers the URL tests start: nginx and moto on loopback ports.
#[cfg(feature = "remote")]
#[path = "remote_common/mod.rs"]
#[allow(unused_imports)]
mod remote_common;

/// `vds_open` reads a container by `http://` URL (nginx on loopback) in a
/// library built with the cargo feature `remote`.
#[cfg(feature = "remote")]
#[test]
fn c_program_reads_a_container_by_url() {
    let www = remote_common::TempDir::new("c-url");
    let path = www.0.join("noise.vds");
    remote_common::noise(&path, 48, 16);
    let server = remote_common::nginx(&www.0);
    let dir = Scratch::new("c-url");
    let src = dir.dir().join("read_url.c");
    std::fs::write(&src, URL_PROGRAM).unwrap();
    let exe = dir.dir().join("read_url");
    let args = shared_link_args();
    compile(&exe, &[src], false, &args.iter().map(String::as_str).collect::<Vec<_>>());
    let url = format!("http://127.0.0.1:{}/noise.vds", server.port);
    let missing = format!("http://127.0.0.1:{}/no-such.vds", server.port);
    let out = run_program(&exe, &[Path::new(&url), &path, Path::new("48"), Path::new(&missing)], &[]);
    assert_eq!(out, "110592 values read by URL; missing object: not found\n", "{out}");
}

/// `vds_open` reads a container by `s3://` URL (moto's S3 server on
/// loopback), its endpoint and credentials from the standard `AWS_*`
/// variables of the C program's environment.
#[cfg(feature = "remote")]
#[test]
fn c_program_reads_a_container_from_s3() {
    let dir = Scratch::new("c-s3");
    let path = dir.dir().join("noise.vds");
    remote_common::noise(&path, 40, 16);
    let server = remote_common::moto();
    remote_common::create_bucket(server.port, "c-bucket");
    remote_common::put_object(server.port, "c-bucket", "2026/noise.vds", &std::fs::read(&path).unwrap());
    let src = dir.dir().join("read_url.c");
    std::fs::write(&src, URL_PROGRAM).unwrap();
    let exe = dir.dir().join("read_url");
    let args = shared_link_args();
    compile(&exe, &[src], false, &args.iter().map(String::as_str).collect::<Vec<_>>());
    let out = run(Command::new(&exe)
        .args([Path::new("s3://c-bucket/2026/noise.vds"), &path, Path::new("40"), Path::new("s3://c-bucket/2026/absent.vds")])
        .env("LD_LIBRARY_PATH", libs())
        .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{}", server.port))
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_REGION", "us-east-1"));
    let out = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out, "64000 values read by URL; missing object: not found\n", "{out}");
}

/// The library's default build links no network client: object_store, its
/// HTTP stack and tokio come only with the cargo feature `remote`.
#[test]
fn the_default_library_links_no_network_client() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = run(Command::new(cargo)
        .args(["tree", "--offline", "-p", "vds", "-e", "normal", "--prefix", "none", "--format", "{p}", "--manifest-path"])
        .arg(root().join("Cargo.toml")));
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(tree.contains("crc32fast"), "{tree}");
    for net in ["object_store", "tokio", "hyper", "reqwest", "rustls", "url "] {
        assert!(!tree.lines().any(|l| l.starts_with(net)), "the default build of vds depends on {net}:\n{tree}");
    }
}
