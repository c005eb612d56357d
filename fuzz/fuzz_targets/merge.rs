#![no_main]
//! Fuzz target `merge`: see vds::fuzzing::merge.
libfuzzer_sys::fuzz_target!(|data: &[u8]| vds::fuzzing::merge(data));
