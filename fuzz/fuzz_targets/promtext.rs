#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| fleetop::fuzz::promtext(data));
