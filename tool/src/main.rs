//! `vds`: look inside libvds containers, check them, and convert arrays to
//! and from NumPy `.npy`, the ds format, SEG-Y and raw binary.
//!
//! Exit status: 0 on success, 1 when something failed (a missing or damaged
//! file, a verify that found damage), 2 for a usage error, 130 after Ctrl-C.

mod args;
mod convert;
mod ds;
mod info;
mod layout;
mod npy;
mod png;
mod segy_in;
mod segy_out;
mod slice;
mod util;

use args::Args;
use std::io::Write;
use std::process::ExitCode;
use util::Fail;

const OVERVIEW: &str = "\
vds: look inside libvds containers, check them, and convert arrays

Usage: vds <command> [options]

Commands:
  info     axes, variables, chunking, codecs, chunk counts and space of a container
  dump     print a variable's values as text or CSV
  verify   check every checksum and structure; exit status 1 on damage
  slice    save one plane of a variable as a PNG picture
  import   make a container from a .npy file, a .ds file, SEG-Y or raw binary
  export   write variables to a .npy file, a .ds file, SEG-Y or raw binary
  copy     copy a container with new chunking or codec, in bounded memory

Run `vds <command> --help` for a command's options and an example.
info, dump, verify, slice, export and copy read a container given as a path
or as an http://, https:// or s3:// URL (read in place with range requests;
S3 settings from the AWS_* environment variables, as AWS_ENDPOINT_URL).
Options: -h, --help   this text;  -V, --version   the tool's and the library's version
";

fn main() -> ExitCode {
    // A bug must still end in one line, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("vds: internal error: {info}");
    }));
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let code = match std::panic::catch_unwind(|| run(&argv)) {
        Ok(Ok(())) => 0,
        Ok(Err(fail)) => fail.report(),
        Err(_) => 1,
    };
    ExitCode::from(code)
}

fn run(argv: &[String]) -> Result<(), Fail> {
    let Some(command) = argv.first() else {
        eprint!("{OVERVIEW}");
        return Err(Fail::Quiet(2));
    };
    let rest = &argv[1..];
    match command.as_str() {
        "-h" | "--help" | "help" => {
            util::out(OVERVIEW.as_bytes())?;
            Ok(())
        }
        "-V" | "--version" => {
            util::out(format!("vds {} (file format {}.{})\n", env!("CARGO_PKG_VERSION"), vds::FORMAT_MAJOR, vds::FORMAT_MINOR).as_bytes())?;
            Ok(())
        }
        "info" => info::info(&Args::parse(rest, &info::INFO)?),
        "dump" => info::dump(&Args::parse(rest, &info::DUMP)?),
        "verify" => info::verify(&Args::parse(rest, &info::VERIFY)?),
        "slice" => slice::slice(&Args::parse(rest, &slice::SLICE)?),
        "import" => convert::import(&Args::parse(rest, &convert::IMPORT)?),
        "export" => convert::export(&Args::parse(rest, &convert::EXPORT)?),
        "copy" => convert::copy(&Args::parse(rest, &convert::COPY)?),
        other => {
            let _ = writeln!(
                std::io::stderr(),
                "vds: unknown command {other:?}; the commands are info, dump, verify, slice, import, export and copy"
            );
            Err(Fail::Quiet(2))
        }
    }
}
