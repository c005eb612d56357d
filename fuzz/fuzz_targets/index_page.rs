#![no_main]
//! Fuzz target `index_page`: see vds::fuzzing::index_page.
libfuzzer_sys::fuzz_target!(|data: &[u8]| vds::fuzzing::index_page(data));
