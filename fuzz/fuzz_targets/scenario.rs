//! Fuzz target `scenario`: any bytes as a scenario file. The loader and validator (what
//! `vmsched check` runs) must return the scenario or an error naming a field or a line, and a
//! valid scenario must serialise as `check` returns it; never panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    match vmsched_sched::load("fuzz.toml", src, &[]) {
        Err(e) => vmsched_fuzz::check_error(&e, src),
        Ok(s) => {
            serde_json::to_string(&s).expect("a valid scenario serialises");
        }
    }
});
