//! §3.4 as a property: on one CPU, a set of CPU-bound deadline tasks of implicit deadlines
//! whose total bandwidth is at most 1 meets every deadline under EDF with CBS: each task gets
//! exactly its runtime in every one of its periods (with HRTICK, so that the runtime is
//! enforced to the nanosecond), whatever else (RT, fair) runs there.
use super::*;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn a_schedulable_set_meets_every_deadline(
        set in proptest::collection::vec((1u64..=20, 1u64..=100), 1..=4),
        with_rt in any::<bool>(),
    ) {
        // Periods of 1..=20 ms; runtimes scaled so that the total bandwidth is at most 1.
        let want: f64 = set.iter().map(|&(_, u)| u as f64).sum();
        let scale = (100.0 / want).min(1.0);
        let tasks: Vec<(u64, u64)> = set
            .iter()
            .map(|&(p, u)| {
                let period = ms(p);
                let q = ((period as f64 * u as f64 / 100.0 * scale) as u64 / 1000 * 1000)
                    .max(1024);
                (q, period)
            })
            .collect();
        let total: f64 = tasks.iter().map(|&(q, p)| q as f64 / p as f64).sum();
        prop_assume!(total <= 1.0);
        let n = tasks.len();
        let mut ents: Vec<EntityParams> = tasks
            .iter()
            .enumerate()
            .map(|(i, &(q, p))| dl(params(i, 1), q, p, p))
            .collect();
        ents.push(params(n, 1));
        if with_rt {
            ents.push(fifo(params(n + 1, 1), 50));
        }
        let mut h = harness_with(true, 1, ents.clone());
        for e in 0..ents.len() as u32 {
            fork(&mut h, e);
        }
        h.pump();
        // Run time of every task at every ms.
        let horizon = 200u64;
        let mut at = vec![vec![0u64; n]];
        for _ in 0..horizon {
            h.run_for(ms(1), ms(1));
            at.push(h.run_ns[..n].to_vec());
        }
        for (i, &(q, p)) in tasks.iter().enumerate() {
            let pm = p / ms(1);
            let mut k = 0;
            while (k + 1) * pm <= horizon {
                let got = at[((k + 1) * pm) as usize][i] - at[(k * pm) as usize][i];
                prop_assert_eq!(
                    got, q,
                    "task {} (Q {} P {}) got {} in period {} (U = {})", i, q, p, got, k, total
                );
                k += 1;
            }
        }
    }
}
