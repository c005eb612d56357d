//! Gives the shared library a versioned soname, so that programs linked
//! against libvds.so.0 refuse a future libvds.so.1 with a changed ABI.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" {
        // The 0 is the ABI version: it changes only when the C ABI breaks.
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libvds.so.0");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
