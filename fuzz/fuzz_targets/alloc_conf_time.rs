//! `cargo fuzz run alloc_conf_time`: see fuzz/targets.rs.
#![no_main]

#[path = "../targets.rs"]
#[allow(dead_code)]
mod targets;

libfuzzer_sys::fuzz_target!(|data: &[u8]| targets::alloc_conf_time(data));
