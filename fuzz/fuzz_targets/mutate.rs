#![no_main]
//! Fuzz target `mutate`: see vds::fuzzing::mutate.
libfuzzer_sys::fuzz_target!(|data: &[u8]| vds::fuzzing::mutate(data));
