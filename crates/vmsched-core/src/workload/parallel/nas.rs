//! The seven NAS Parallel Benchmark kernels of seed 004 (EP, LU, SP, BT, MG, FT, CG; NPB 3.3,
//! MPI) as shapes of a parallel job: their problem classes, iteration counts and per-iteration
//! communication as spec/workloads.md §5.1–5.2 give them (with ERRATA W6), written as rank
//! programs (parallel.rs).
//!
//! Sizes and iteration counts are NPB's `setparams` (the spec's table). The communication
//! structures are the spec's modelling approximations (unverified line-by-line there). The
//! compute per iteration is **an assumption** of this model (docs/parallel.md): a serial time
//! per kernel at seed 004's class (chosen so that 16 ranks on 8 pCPUs fall in the thesis's
//! 100–1000 s under load), scaled to other classes by the problem size times the iterations,
//! and divided evenly among the ranks.

use serde::{Deserialize, Serialize};

use super::Prog;
use super::Shape;
use crate::time::{Nanos, NS_PER_S};

/// A NAS kernel, or a custom job.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Kernel {
    Ep,
    Lu,
    Sp,
    Bt,
    Mg,
    Ft,
    Cg,
    #[default]
    Custom,
}

impl Kernel {
    /// Its name in a scenario.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Ep => "ep",
            Kernel::Lu => "lu",
            Kernel::Sp => "sp",
            Kernel::Bt => "bt",
            Kernel::Mg => "mg",
            Kernel::Ft => "ft",
            Kernel::Cg => "cg",
            Kernel::Custom => "custom",
        }
    }

    /// The classes the spec gives for the kernel, and seed 004's.
    fn classes(self) -> (&'static str, char) {
        match self {
            Kernel::Ep => ("SWABCDE", 'D'),
            Kernel::Lu => ("ABCD", 'A'),
            Kernel::Sp | Kernel::Bt => ("ABC", 'A'),
            Kernel::Mg => ("ABCD", 'C'),
            Kernel::Ft => ("ABC", 'B'),
            Kernel::Cg => ("ABC", 'A'),
            Kernel::Custom => ("", '-'),
        }
    }
}

/// The class asked for (default: seed 004's); errors name `class`.
pub fn class(k: Kernel, asked: Option<&str>) -> Result<char, (String, String)> {
    let (have, thesis) = k.classes();
    match asked {
        None => Ok(thesis),
        Some(_) if k == Kernel::Custom => Err((
            "class".into(),
            "a custom job has no class (name a kernel: ep, lu, sp, bt, mg, ft, cg)".into(),
        )),
        Some(c) => {
            let up = c.to_ascii_uppercase();
            match up.chars().next() {
                Some(ch) if up.len() == 1 && have.contains(ch) => Ok(ch),
                _ => Err((
                    "class".into(),
                    format!(
                        "{} has classes {} (spec/workloads.md §5.1), got '{c}'",
                        k.name(),
                        have.chars()
                            .map(String::from)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )),
            }
        }
    }
}

/// One class of one kernel: linear size(s) and iterations (NPB setparams).
#[derive(Clone, Copy, Debug)]
struct Size {
    /// Grid (nx, ny, nz); CG: (n, nonzeros per row, 1); EP: (2^M, 1, 1) as M in `nx`.
    nx: u64,
    ny: u64,
    nz: u64,
    iters: u32,
}

fn size(k: Kernel, c: char) -> Size {
    let cube = |n: u64, iters| Size {
        nx: n,
        ny: n,
        nz: n,
        iters,
    };
    match (k, c) {
        (Kernel::Ep, c) => Size {
            nx: match c {
                'S' => 24,
                'W' => 25,
                'A' => 28,
                'B' => 30,
                'C' => 32,
                'D' => 36,
                _ => 40,
            },
            ny: 1,
            nz: 1,
            // Assumption: EP's trials in 100 equal batches (EP has no iterations: it only
            // meets the others at the start and the end).
            iters: 100,
        },
        (Kernel::Lu, 'A') => cube(64, 250),
        (Kernel::Lu, 'B') => cube(102, 250),
        (Kernel::Lu, 'C') => cube(162, 250),
        (Kernel::Lu, _) => cube(408, 300),
        (Kernel::Sp, 'A') => cube(64, 400),
        (Kernel::Sp, 'B') => cube(102, 400),
        (Kernel::Sp, _) => cube(162, 400),
        (Kernel::Bt, 'A') => cube(64, 200),
        (Kernel::Bt, 'B') => cube(102, 200),
        (Kernel::Bt, _) => cube(162, 200),
        (Kernel::Mg, 'A') => cube(256, 4),
        (Kernel::Mg, 'B') => cube(256, 20),
        (Kernel::Mg, 'C') => cube(512, 20),
        (Kernel::Mg, _) => cube(1024, 50),
        (Kernel::Ft, 'A') => Size {
            nx: 256,
            ny: 256,
            nz: 128,
            iters: 6,
        },
        (Kernel::Ft, 'B') => Size {
            nx: 512,
            ny: 256,
            nz: 256,
            iters: 20,
        },
        (Kernel::Ft, _) => cube(512, 20),
        // CG: 25 CG iterations per outer iteration.
        (Kernel::Cg, 'A') => Size {
            nx: 14_000,
            ny: 11,
            nz: 1,
            iters: 15 * 25,
        },
        (Kernel::Cg, 'B') => Size {
            nx: 75_000,
            ny: 13,
            nz: 1,
            iters: 75 * 25,
        },
        (Kernel::Cg, _) => Size {
            nx: 150_000,
            ny: 15,
            nz: 1,
            iters: 75 * 25,
        },
        (Kernel::Custom, _) => cube(1, 1),
    }
}

/// Work of one class (relative): points × iterations (EP: 2^M; CG: n × nonzeros × iterations).
fn work(k: Kernel, c: char) -> f64 {
    let s = size(k, c);
    match k {
        Kernel::Ep => 2f64.powi(s.nx as i32),
        _ => (s.nx * s.ny * s.nz) as f64 * f64::from(s.iters),
    }
}

/// **Assumption** (docs/parallel.md): the serial compute time of each kernel at seed 004's
/// class on the thesis's 2.5 GHz Xeon, in seconds, so that 16 ranks on 8 pCPUs (2:1) fall in
/// the thesis's 100–1000 s.
fn serial_s(k: Kernel) -> f64 {
    match k {
        Kernel::Ep => 2560.0,
        Kernel::Lu => 480.0,
        Kernel::Sp => 480.0,
        Kernel::Bt => 800.0,
        Kernel::Mg => 640.0,
        Kernel::Ft => 480.0,
        Kernel::Cg => 48.0,
        Kernel::Custom => 0.0,
    }
}

/// A preset's iterations and compute per rank per iteration (with `n` ranks); None for custom.
pub fn defaults(k: Kernel, c: char, n: u32) -> (Option<u32>, Option<Nanos>) {
    if k == Kernel::Custom {
        return (None, None);
    }
    let (_, thesis) = k.classes();
    let s = size(k, c);
    let total = serial_s(k) * work(k, c) / work(k, thesis);
    let per = total / f64::from(n.max(1)) / f64::from(s.iters);
    (Some(s.iters), Some((per * NS_PER_S as f64) as Nanos))
}

/// The rank counts NPB accepts: a power of two (LU, MG, FT, CG), a square (SP, BT).
pub fn check_ranks(k: Kernel, n: u32) -> Result<(), (String, String)> {
    let ok = match k {
        Kernel::Lu | Kernel::Mg | Kernel::Ft | Kernel::Cg => n.is_power_of_two(),
        Kernel::Sp | Kernel::Bt => {
            let r = (n as f64).sqrt().round() as u32;
            r * r == n
        }
        Kernel::Ep | Kernel::Custom => true,
    };
    if ok {
        Ok(())
    } else {
        Err((
            "placement".into(),
            format!(
                "{} runs on a {} number of ranks, got {n}",
                k.name(),
                if matches!(k, Kernel::Sp | Kernel::Bt) {
                    "square"
                } else {
                    "power-of-two"
                }
            ),
        ))
    }
}

/// A 2-D process grid (rows, columns) for `n` = 2^k ranks: columns 2^⌈k/2⌉ (NPB CG's, LU's).
fn grid2(n: u32) -> (u32, u32) {
    let k = n.trailing_zeros();
    let cols = 1 << k.div_ceil(2);
    (n / cols, cols)
}

/// A 3-D process grid for `n` = 2^k ranks: factors of two dealt to x, y, z in turn (MG's
/// 4 × 2 × 2 for 16).
fn grid3(n: u32) -> [u32; 3] {
    let mut d = [1u32; 3];
    for i in 0..n.trailing_zeros() {
        d[i as usize % 3] *= 2;
    }
    d
}

/// A byte count, at least 8 (one double).
fn bytes(v: f64) -> u32 {
    (v.max(8.0)).min(u32::MAX as f64) as u32
}

/// Writes the kernel's iterations into rank `p.r`'s program.
pub fn emit(p: &mut Prog, s: &Shape) {
    let (n, r, c) = (p.n(), p.r, s.compute);
    let sz = size(s.kernel, s.class);
    match s.kernel {
        Kernel::Custom => {
            p.allreduce(0);
            let at = p.here();
            p.compute(c);
            p.custom();
            p.lap();
            p.repeat(at, s.iterations);
        }
        Kernel::Ep => {
            // ERRATA W6: a start barrier, the batches, a few all-reduces at the end (the two
            // sums, the ten annulus counts) and the timing barrier.
            p.allreduce(0);
            let at = p.here();
            p.compute(c);
            p.lap();
            p.repeat(at, s.iterations);
            p.allreduce(16);
            p.allreduce(80);
            p.allreduce(0);
        }
        Kernel::Lu => {
            // 2-D grid; per iteration a halo exchange of the solution array (ERRATA W6) with
            // the four grid neighbours, then the lower and upper wavefront sweeps over the
            // nz − 2 k-planes: receive from the two upstream neighbours, compute, send to the
            // two downstream ones (5 doubles per point of the tile's edge).
            let (rows, cols) = grid2(n);
            let (i, j) = (r / cols, r % cols);
            let at_ = |i: u32, j: u32| i * cols + j;
            let north = (i > 0).then(|| at_(i - 1, j));
            let south = (i + 1 < rows).then(|| at_(i + 1, j));
            let west = (j > 0).then(|| at_(i, j - 1));
            let east = (j + 1 < cols).then(|| at_(i, j + 1));
            let halo: Vec<u32> = [north, south, west, east].into_iter().flatten().collect();
            let up: Vec<u32> = [north, west].into_iter().flatten().collect();
            let down: Vec<u32> = [south, east].into_iter().flatten().collect();
            let edge = sz.nx as f64 / f64::from(cols.max(rows));
            let halo_b = bytes(5.0 * 8.0 * edge * sz.nz as f64);
            let wave_b = bytes(5.0 * 8.0 * edge);
            let planes = (sz.nz - 2) as u32;
            let sweep = c * 9 / 20 / u64::from(planes);
            p.allreduce(0);
            let it = p.here();
            p.exchange(&halo, halo_b);
            p.compute(c / 10);
            for (from, to) in [(&up, &down), (&down, &up)] {
                let at = p.here();
                for &q in from.iter() {
                    p.recv(q);
                }
                p.compute(sweep);
                for &q in to.iter() {
                    p.send(q, wave_b);
                }
                p.repeat(at, planes);
            }
            p.lap();
            p.repeat(it, s.iterations);
            p.allreduce(40);
        }
        Kernel::Sp | Kernel::Bt => {
            // Multipartition on a √N × √N grid: per step a face exchange with up to six
            // neighbours (the row, column and diagonal rings both ways), then the x, y, z line
            // solves: each a forward and a backward pipeline of √N − 1 hand-offs around its
            // ring (≈ 19 synchronisations per step for 16 ranks).
            let q = (n as f64).sqrt().round() as u32;
            let (i, j) = (r / q, r % q);
            let at_ = |i: u32, j: u32| (i % q) * q + (j % q);
            let rings = [
                (at_(i, j + 1), at_(i, j + q - 1)),
                (at_(i + 1, j), at_(i + q - 1, j)),
                (at_(i + 1, j + 1), at_(i + q - 1, j + q - 1)),
            ];
            let mut faces: Vec<u32> = rings.iter().flat_map(|&(a, b)| [a, b]).collect();
            faces.sort_unstable();
            faces.dedup();
            faces.retain(|&x| x != r);
            let cell = sz.nx as f64 / f64::from(q);
            let vars = if s.kernel == Kernel::Bt { 15.0 } else { 5.0 };
            let face_b = bytes(2.0 * 5.0 * 8.0 * cell * cell);
            let line_b = bytes(vars * 8.0 * cell * cell);
            let handoffs = q.saturating_sub(1).max(1);
            let stage = c * 3 / 4 / u64::from(6 * handoffs);
            p.allreduce(0);
            let it = p.here();
            p.exchange(&faces, face_b);
            p.compute(c / 4);
            for &(next, prev) in &rings {
                for (to, from) in [(next, prev), (prev, next)] {
                    let at = p.here();
                    p.compute(stage);
                    p.send(to, line_b);
                    p.recv(from);
                    p.repeat(at, handoffs);
                }
            }
            p.lap();
            p.repeat(it, s.iterations);
            p.allreduce(40);
        }
        Kernel::Mg => {
            // 3-D grid; per iteration down and up the V-cycle (log2 n levels), at each level
            // a halo exchange with the two neighbours on each axis (faces shrinking by 4 per
            // level, compute by 8), then the norm's all-reduce.
            let d = grid3(n);
            let pos = [r % d[0], (r / d[0]) % d[1], r / (d[0] * d[1])];
            let at_ = |p: [u32; 3]| p[0] + d[0] * (p[1] + d[1] * p[2]);
            let mut nb = Vec::new();
            for a in 0..3 {
                for step in [1, d[a] - 1] {
                    let mut x = pos;
                    x[a] = (x[a] + step) % d[a];
                    nb.push(at_(x));
                }
            }
            let ext = [
                sz.nx as f64 / f64::from(d[0]),
                sz.ny as f64 / f64::from(d[1]),
                sz.nz as f64 / f64::from(d[2]),
            ];
            let face = 8.0 * (ext[0] * ext[1] + ext[1] * ext[2] + ext[0] * ext[2]) / 3.0;
            let levels = 63 - sz.nx.leading_zeros();
            // Compute per level ∝ 8^-l, both ways: the finest level's share of c.
            let total: f64 = (0..levels).map(|l| 2.0 * 8f64.powi(-(l as i32))).sum();
            p.allreduce(0);
            let it = p.here();
            let order: Vec<u32> = (0..levels).chain((0..levels).rev()).collect();
            for l in order {
                let w = 8f64.powi(-(l as i32)) / total;
                p.compute((c as f64 * w) as Nanos);
                p.exchange(&nb, bytes(face / 4f64.powi(l as i32)));
            }
            p.allreduce(8);
            p.lap();
            p.repeat(it, s.iterations);
        }
        Kernel::Ft => {
            // Slabs; per iteration an inverse 3-D FFT with a global transpose (an all-to-all:
            // 1/N of the slab to every rank) and the checksum's all-reduce; one forward FFT
            // (compute and transpose) at the start.
            let pts = (sz.nx * sz.ny * sz.nz) as f64;
            let per = bytes(16.0 * pts / f64::from(n) / f64::from(n));
            p.allreduce(0);
            p.compute(c);
            p.alltoall(per);
            let it = p.here();
            p.compute(c);
            p.alltoall(per);
            p.allreduce(16);
            p.lap();
            p.repeat(it, s.iterations);
        }
        Kernel::Cg => {
            // 2-D grid; per CG iteration the sparse mat-vec's reduction across the row
            // (log2 of the columns pairwise steps of n/cols doubles), the transpose exchange,
            // and two dot products (each the same pairwise steps of one double).
            let (rows, cols) = grid2(n);
            let (i, j) = (r / cols, r % cols);
            let transpose = if rows == cols {
                j * cols + i
            } else {
                (r + n / 2) % n
            };
            let vec_b = bytes(8.0 * sz.nx as f64 / f64::from(cols));
            let steps: Vec<u32> = (0..cols.trailing_zeros()).map(|b| r ^ (1 << b)).collect();
            p.allreduce(0);
            let it = p.here();
            p.compute(c);
            for &q in &steps {
                p.exchange(&[q], vec_b);
            }
            p.exchange(&[transpose], vec_b);
            for _ in 0..2 {
                for &q in &steps {
                    p.exchange(&[q], 8);
                }
            }
            p.lap();
            p.repeat(it, s.iterations);
            p.allreduce(8);
        }
    }
}
