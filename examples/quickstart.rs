//! Create a small volume, write it, and read one slice back.
use vds::{Axis, Codec, DType, Dataset, DatasetBuilder, Order, Region, VariableBuilder};

fn main() -> vds::Result<()> {
    // Describe the file: three axes and one variable in 32^3 compressed chunks.
    let mut ds = DatasetBuilder::new()
        .overwrite(true)
        .axis(Axis::new("inline", 100))
        .axis(Axis::new("crossline", 80))
        .axis(Axis::new("time", 60).unit("ms").coordinates(0.0, 236.0))
        .variable(
            VariableBuilder::new("amplitude", DType::Float32, &["inline", "crossline", "time"])
                .chunk(&[32, 32, 32])
                .codec(Codec::deflate(6)),
        )
        .attribute("survey", "quickstart")
        .create("quickstart.vds")?;

    // Write the whole volume from a C-order buffer, then commit atomically.
    let volume: Vec<f32> = (0..100 * 80 * 60).map(|i| (i as f32 * 0.001).sin()).collect();
    ds.write("amplitude", &Region::full(&[100, 80, 60])?, Order::C, &volume)?;
    ds.close()?;

    // Read one time slice back, in Fortran order (first axis fastest).
    let ds = Dataset::open("quickstart.vds")?;
    let slice: Vec<f32> = ds.read_vec("amplitude", &Region::new(&[0, 0, 30], &[100, 80, 1])?, Order::Fortran)?;
    assert_eq!(slice[1], volume[80 * 60 + 30]); // inline 1, crossline 0
    println!("read {} values; descriptor: {}", slice.len(), ds.descriptor_json());
    Ok(())
}
