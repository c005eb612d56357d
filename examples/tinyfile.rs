//! Writes or reads one tiny file (one int64), for counting system calls:
//! `strace -f -c target/release/examples/tinyfile write|read PATH`.
use vds::{Axis, DType, Dataset, DatasetBuilder, Durability, Order, Region, VariableBuilder};

fn main() -> vds::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (mode, path) = (args.get(1).map_or("write", String::as_str), args.get(2).map_or("tiny.vds", String::as_str));
    if mode == "write" {
        let mut ds = DatasetBuilder::new()
            .overwrite(true)
            .durability(Durability::None)
            .axis(Axis::new("x", 1))
            .variable(VariableBuilder::new("v", DType::Int64, &["x"]).chunk(&[1]))
            .create(path)?;
        ds.write("v", &Region::full(&[1])?, Order::C, &[42i64])?;
        ds.close()
    } else {
        let v: Vec<i64> = Dataset::open(path)?.read_vec("v", &Region::full(&[1])?, Order::C)?;
        assert_eq!(v, [42]);
        Ok(())
    }
}
