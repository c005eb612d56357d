//! `vds export FILE.vds OUT.sgy`: a variable to SEG-Y. The conversion itself
//! is `vds_segy::container::export` (shared with the Python package); this
//! module reads the options, shows progress and answers Ctrl-C.

use crate::args::Args;
use crate::convert::block_budget;
use crate::util::{at, interrupted, Destination, Fail, Progress};
use vds::Dataset;
use vds_segy::container::{self, ExportOptions};
use vds_segy::SampleFormat;

pub fn export(args: &Args, src: &Dataset, input: &str, output: &str, dest: &Destination, left: &str) -> Result<(), Fail> {
    let v = match args.pos(2) {
        Some(name) => name.to_string(),
        None => container::export_variable(src, None).map_err(|e| args.usage(format!("{input} has {e}")))?,
    };
    if !src.variables().iter().any(|x| x.name() == v) {
        return Err(Fail::Error(format!("{input}: no variable named {v:?}")));
    }
    let format = args.parsed("segy-format", |s| {
        s.parse::<i16>().ok().and_then(SampleFormat::from_code).ok_or_else(|| "not a SEG-Y sample format code".to_string())
    })?;
    let opts = ExportOptions { format, source_name: input.to_string(), block_bytes: block_budget() };
    let file = std::fs::File::create(dest.temp()).map_err(at(output))?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
    let shape = src.variables().iter().find(|x| x.name() == v).map(|x| x.shape().to_vec()).unwrap_or_default();
    let esize = src.variables().iter().find(|x| x.name() == v).map_or(0, |x| x.dtype().size() as u64);
    let total = shape.iter().product::<u64>() * esize;
    let mut progress = Progress::new(&format!("exporting {v}"), total, args.flag("quiet"));
    container::export(src, &v, &opts, &mut w, &mut |n| {
        progress.set(n);
        interrupted("").is_ok()
    })
    .map_err(|e| match e {
        container::Error::Cancelled => Fail::Interrupted(left.to_string()),
        container::Error::Write(e) => Fail::Error(format!("{output}: writing: {e}")),
        container::Error::Segy(e) => Fail::Error(format!("{output}: {e}")),
        e => Fail::Error(format!("{input}: {e}")),
    })?;
    progress.finish();
    Ok(())
}
