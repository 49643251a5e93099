//! Fuzz target `overrides`: arbitrary overrides applied to a shipped scenario, as the CLI passes
//! them (`key=value` text, one per line) or as the Python front does (typed values). Loading must
//! return the scenario or an error naming a field or a line; never panic.
#![no_main]
use arbitrary::{Arbitrary, Unstructured};
use libfuzzer_sys::fuzz_target;
use vmsched_core::scenario::SetValue;
use vmsched_fuzz::{check_error, Value, KEYS, SHIPPED};

#[derive(Arbitrary, Debug)]
enum Key {
    Known(u8),
    Indexed(u8, u8, u8),
    Free(String),
}

fn key(k: Key) -> String {
    match k {
        Key::Known(i) => KEYS[i as usize % KEYS.len()].to_string(),
        // A known key with its domain / workload indices replaced.
        Key::Indexed(i, d, w) => KEYS[i as usize % KEYS.len()]
            .replace("domain.0", &format!("domain.{}", d % 5))
            .replace("workload.0", &format!("workload.{}", w % 6)),
        Key::Free(s) => s,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    // Bits 0-1, 5 and 6 select the scenario (bits 5 and 6 came with later scenarios, so an
    // input written before keeps its scenario); bit 2 the form.
    let pick = (head & 3) | ((head >> 3) & 12);
    let (file, src) = SHIPPED[pick as usize % SHIPPED.len()];
    let typed: Vec<(String, SetValue)> = if head & 4 == 0 {
        // CLI form: one `key=value` a line.
        String::from_utf8_lossy(rest)
            .lines()
            .take(16)
            .map(|l| match l.split_once('=') {
                Some((k, v)) => (k.to_string(), SetValue::Text(v.to_string())),
                None => (l.to_string(), SetValue::Text(String::new())),
            })
            .collect()
    } else {
        let mut u = Unstructured::new(rest);
        let mut v = Vec::new();
        while v.len() < 16 && !u.is_empty() {
            let (Ok(k), Ok(x)) = (Key::arbitrary(&mut u), Value::arbitrary(&mut u)) else {
                break;
            };
            v.push((key(k), x.into_set(0)));
        }
        v
    };
    match vmsched_sched::load_with(file, src, &typed) {
        Err(e) => check_error(&e, src),
        Ok(s) => {
            serde_json::to_string(&s).expect("a valid scenario serialises");
        }
    }
});
