#![no_main]
//! Fuzz target `descriptor`: see vds::fuzzing::descriptor.
libfuzzer_sys::fuzz_target!(|data: &[u8]| vds::fuzzing::descriptor(data));
