#![no_main]
// The words the agent reads from InfiniBand sysfs files (`state`, `rate`).
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let s = String::from_utf8_lossy(data);
    let _ = fleetop_agent::sources::ib::parse_state(&s);
    let _ = fleetop_agent::sources::ib::parse_rate_gbps(&s);
});
