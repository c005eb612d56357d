#![no_main]
//! Fuzz target `bounded`: see vds::fuzzing::bounded.
libfuzzer_sys::fuzz_target!(|data: &[u8]| vds::fuzzing::bounded(data));
