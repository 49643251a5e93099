//! Fuzz target `run`: the core on any scenario that validates. The first byte picks the input's
//! form: 0 takes the rest as scenario text (the seed corpus holds the shipped scenarios), any
//! other value draws a whole scenario from the grammar of `vmsched_fuzz::generate`. The run is
//! cut to 2 simulated milliseconds, too-large scenarios are skipped (`small_enough`), and the
//! engine checks its invariants after every event. Never panic; always reach the run's end.
#![no_main]
use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    if head == 0 {
        if let Ok(src) = std::str::from_utf8(rest) {
            vmsched_fuzz::load_and_run(src, 2);
        }
    } else {
        let src = vmsched_fuzz::generate(&mut Unstructured::new(rest));
        vmsched_fuzz::load_and_run(&src, 2);
    }
});
