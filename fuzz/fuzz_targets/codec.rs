#![no_main]
//! Fuzz target `codec`: see vds::fuzzing::codec.
libfuzzer_sys::fuzz_target!(|data: &[u8]| vds::fuzzing::codec(data));
