//! Fuzz target `xlcfg`: any bytes as a Xen xl.cfg file (`vmsched import xl`). The reader
//! returns a `[[domain]]` fragment or an error naming its line or key; a fragment made into a
//! scenario loads or fails naming a field. Never panic. (`vmsched_fuzz::import_case`.)
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    vmsched_fuzz::import_case(vmsched_sched::import::Format::Xl, data);
});
