//! Fuzz target `sysctl`: any bytes as a Linux sysctl / sched_features dump (`vmsched import
//! sysctl`). The reader returns a `[domain.sched]` fragment or an error naming its line or key;
//! a fragment made into a scenario loads or fails naming a field. Never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    vmsched_fuzz::import_case(vmsched_sched::import::Format::Sysctl, data);
});
