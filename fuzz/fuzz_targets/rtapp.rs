//! Fuzz target `rtapp`: any bytes as an rt-app JSON file (`vmsched import rtapp`). The reader
//! returns program workloads or an error naming its line or key; a fragment made into a scenario
//! loads or fails naming a field. Never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    vmsched_fuzz::import_case(vmsched_sched::import::Format::Rtapp, data);
});
