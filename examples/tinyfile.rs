//! Writes or reads one tiny file (one int64), for counting system calls:
//! `strace -f -c target/release/examples/tinyfile write|read PATH`; with a
//! count N, writes or reads PATH0 to PATH{N-1} and prints the time per file;
//! a third number, V, puts V int64 values (0 to V-1) in each file instead of one (`-`: one),
//! and a fourth, R, does it R times in the one process and prints the median
//! round (warm, as the benchmark's loops are; bench/python.py pairs it with
//! the same loop through the Python package). A fifth number, M, makes the
//! names PATH0 to PATH{M-1} before the loop over the first N (so that
//! bench/instructions.py's count over N files leaves the names' making out).
use vds::{Axis, DType, Dataset, DatasetBuilder, Durability, Order, Region, VariableBuilder};

fn write(path: &str, values: &[i64]) -> vds::Result<()> {
    let n = values.len() as u64;
    let mut ds = DatasetBuilder::new()
        .overwrite(true)
        .durability(Durability::None)
        .axis(Axis::new("x", n))
        .variable(VariableBuilder::new("v", DType::Int64, &["x"]).chunk(&[n]))
        .create(path)?;
    ds.write("v", &Region::full(&[n])?, Order::C, values)?;
    ds.close()
}

fn read(path: &str, values: &[i64]) -> vds::Result<()> {
    let v: Vec<i64> = Dataset::open(path)?.read_vec("v", &Region::full(&[values.len() as u64])?, Order::C)?;
    assert_eq!(v, values);
    Ok(())
}

fn main() -> vds::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (mode, path) = (args.get(1).map_or("write", String::as_str), args.get(2).map_or("tiny.vds", String::as_str));
    let values: Vec<i64> = match args.get(4).filter(|v| *v != "-") {
        Some(v) => (0..v.parse::<i64>().expect("a number of values")).collect(),
        None => vec![42],
    };
    let f = if mode == "write" { write } else { read };
    let Some(n) = args.get(3).map(|n| n.parse::<u32>().expect("a count")) else { return f(path, &values) };
    let rounds = args.get(5).map_or(1, |r| r.parse::<usize>().expect("a number of rounds").max(1));
    let made = args.get(6).map_or(n, |m| m.parse::<u32>().expect("a count of names").max(n));
    let names: Vec<String> = (0..made).map(|i| format!("{path}{i}")).collect();
    let paths = &names[..n as usize];
    let mut times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = std::time::Instant::now();
        for p in paths {
            f(p, &values)?;
        }
        times.push(t.elapsed().as_secs_f64() * 1e6 / f64::from(n.max(1)));
    }
    times.sort_by(f64::total_cmp);
    println!("{mode}: {:.2} us per file", times[times.len() / 2]);
    Ok(())
}
