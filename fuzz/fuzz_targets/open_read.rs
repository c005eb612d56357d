#![no_main]
//! Fuzz target `open_read`: see vds::fuzzing::open_read.
libfuzzer_sys::fuzz_target!(|data: &[u8]| vds::fuzzing::open_read(data));
