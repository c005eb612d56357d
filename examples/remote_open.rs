//! Opens a container by URL and reads one time slice of it.
use vds::{Order, Region};

fn main() -> vds::Result<()> {
    let url = std::env::args().nth(1).unwrap_or_else(|| "s3://survey-bucket/2026/survey.vds".into());
    let ds = vds::remote::open(&url)?;
    let shape = ds.variable("amplitude")?.shape().to_vec();
    let slice: Vec<f32> = ds.read_vec("amplitude", &Region::new(&[0, 0, shape[2] / 2], &[shape[0], shape[1], 1])?, Order::C)?;
    println!("{url}: {} values in the middle time slice", slice.len());
    Ok(())
}
