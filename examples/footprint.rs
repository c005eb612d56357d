//! Prints the bytes on disk of the ds-format paper's tiny file (one int64)
//! and small file (arange(1000) as int64, 8000 bytes) in each layout
//! (SPEC.md 1.1), written as suite (a) of bench/bench.rs writes them:
//! `cargo run --release --example footprint [DIR]`.
use vds::{Axis, DType, DatasetBuilder, Durability, Layout, Order, Region, VariableBuilder};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).map_or_else(std::env::temp_dir, std::path::PathBuf::from);
    println!("| file | data | layout | bytes on disk | overhead |");
    println!("|---|---:|---|---:|---:|");
    for (label, values) in [("one int64", vec![42i64]), ("arange(1000) int64", (0..1000).collect::<Vec<i64>>())] {
        for (layout, name) in [(Layout::Aligned, "aligned (as 1.3)"), (Layout::Auto, "default (compact)")] {
            let path = dir.join(format!("footprint-{}.vds", values.len()));
            let n = values.len() as u64;
            let mut ds = DatasetBuilder::new()
                .overwrite(true)
                .durability(Durability::None)
                .layout(layout)
                .axis(Axis::new("x", n))
                .variable(&VariableBuilder::new("v", DType::Int64, &["x"]))
                .create(&path)?;
            ds.write("v", &Region::full(&[n])?, Order::C, &values)?;
            ds.close()?;
            let size = std::fs::metadata(&path)?.len();
            println!("| {label} | {} | {name} | {size} | {} |", 8 * n, size - 8 * n);
            let _ = std::fs::remove_file(&path);
        }
    }
    Ok(())
}
