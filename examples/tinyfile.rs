//! Writes or reads one tiny file (one int64), for counting system calls:
//! `strace -f -c target/release/examples/tinyfile write|read PATH`; with a
//! count N, writes or reads PATH0 to PATH{N-1} and prints the time per file.
use vds::{Axis, DType, Dataset, DatasetBuilder, Durability, Order, Region, VariableBuilder};

fn write(path: &str) -> vds::Result<()> {
    let mut ds = DatasetBuilder::new()
        .overwrite(true)
        .durability(Durability::None)
        .axis(Axis::new("x", 1))
        .variable(VariableBuilder::new("v", DType::Int64, &["x"]).chunk(&[1]))
        .create(path)?;
    ds.write("v", &Region::full(&[1])?, Order::C, &[42i64])?;
    ds.close()
}

fn read(path: &str) -> vds::Result<()> {
    let v: Vec<i64> = Dataset::open(path)?.read_vec("v", &Region::full(&[1])?, Order::C)?;
    assert_eq!(v, [42]);
    Ok(())
}

fn main() -> vds::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (mode, path) = (args.get(1).map_or("write", String::as_str), args.get(2).map_or("tiny.vds", String::as_str));
    let f = if mode == "write" { write } else { read };
    let Some(n) = args.get(3).map(|n| n.parse::<u32>().expect("a count")) else { return f(path) };
    let t = std::time::Instant::now();
    for i in 0..n {
        f(&format!("{path}{i}"))?;
    }
    println!("{mode}: {:.1} us per file", t.elapsed().as_secs_f64() * 1e6 / f64::from(n.max(1)));
    Ok(())
}
