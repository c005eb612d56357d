//! The README's Rust, C and Python examples are examples/quickstart.rs,
//! cbindings/example.c and examples/quickstart.py, verbatim (the Python one
//! runs in python/tests/test_examples.py), and the
//! README's two commands are the ones CI runs.

#[test]
fn readme_example_is_the_quickstart() {
    let root = env!("CARGO_MANIFEST_DIR");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let example = std::fs::read_to_string(format!("{root}/examples/quickstart.rs")).unwrap();
    assert!(readme.contains(&format!("```rust\n{example}```")), "copy examples/quickstart.rs into README.md's Rust example");
    let c_example = std::fs::read_to_string(format!("{root}/cbindings/example.c")).unwrap();
    assert!(readme.contains(&format!("```c\n{c_example}```")), "copy cbindings/example.c into README.md's C example");
    let py_example = std::fs::read_to_string(format!("{root}/examples/quickstart.py")).unwrap();
    assert!(readme.contains(&format!("```python\n{py_example}```")), "copy examples/quickstart.py into README.md's Python example");
    let ci = std::fs::read_to_string(format!("{root}/.ci/run")).unwrap();
    for cmd in ["sh .ci/deps.sh && cargo test --release", "cargo run --release --example demo"] {
        assert!(readme.contains(cmd) && ci.contains(cmd), "README.md and .ci/run must both run `{cmd}`");
    }
}
