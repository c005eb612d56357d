#![no_main]
//! Fuzz target `segy`: see vds_segy::fuzzing::parse.
libfuzzer_sys::fuzz_target!(|data: &[u8]| vds_segy::fuzzing::parse(data));
