//! `[domain.chaos]`: seeded injection of vCPU preemptions (steal) into a guest, to see how its
//! software and its scheduler degrade when the host takes its vCPUs away at random (issue 14
//! item 6; docs/chaos.md). Each vCPU of the domain loses its pCPU for a drawn duration at
//! random instants, so that over a long run the fraction of time stolen is `rate`. No real
//! system has this knob: it stands for the noisy neighbours, SMIs and host work a cloud guest
//! sees as steal. The engine side is `sim/chaos.rs`.

use serde::{Deserialize, Serialize};

/// How a stall's duration is drawn.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ChaosDist {
    /// Exponential with mean `mean_us`.
    #[default]
    Exponential,
    /// Uniform in `[0, 2 * mean_us]`.
    Uniform,
    /// Always `mean_us`.
    Fixed,
}

/// `[domain.chaos]` of a domain.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ChaosConfig {
    /// The fraction of each vCPU's time the injected stalls take, in `[0, 1)`. 0 (the
    /// default) injects nothing: the run is the run without the table.
    #[serde(default)]
    pub rate: f64,
    /// The distribution of one stall's duration.
    #[serde(default)]
    pub duration: ChaosDist,
    /// The mean stall (µs, > 0; default 1000: a 1 ms preemption, about a Xen/CFS host slice).
    #[serde(default = "d_mean")]
    pub mean_us: f64,
    /// The name of the seeded stream the stalls are drawn from (default `chaos/<domain>`);
    /// vCPU `k` draws from `<stream>/<k>`. Two domains naming one stream draw the same stalls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<String>,
    /// Stall every vCPU of the domain at once (a whole-domain stall: the host's own work or
    /// an SMI on a machine the domain fills). Off by default: each vCPU on its own stream.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub correlated: bool,
}

fn d_mean() -> f64 {
    1000.0
}

impl Default for ChaosConfig {
    fn default() -> Self {
        ChaosConfig {
            rate: 0.0,
            duration: ChaosDist::default(),
            mean_us: d_mean(),
            stream: None,
            correlated: false,
        }
    }
}

impl ChaosConfig {
    /// Checks the table. Err((field relative to the table, message)).
    pub fn validate(&self) -> Result<(), (String, String)> {
        if !self.rate.is_finite() || !(0.0..1.0).contains(&self.rate) {
            return Err((
                "rate".into(),
                format!("must be in [0, 1) (a fraction of time), got {}", self.rate),
            ));
        }
        if !self.mean_us.is_finite() || self.mean_us <= 0.0 || self.mean_us > 1e9 {
            return Err((
                "mean_us".into(),
                format!("must be in (0, 1e9] µs, got {}", self.mean_us),
            ));
        }
        if self.stream.as_deref().is_some_and(str::is_empty) {
            return Err(("stream".into(), "must not be empty".into()));
        }
        Ok(())
    }

    /// The engine's view: None when nothing is injected (rate 0).
    pub fn spec(&self, domain: &str) -> Option<ChaosSpec> {
        (self.rate > 0.0).then(|| ChaosSpec {
            rate: self.rate,
            dist: self.duration,
            mean_ns: self.mean_us * 1e3,
            stream: self
                .stream
                .clone()
                .unwrap_or_else(|| format!("chaos/{domain}")),
            correlated: self.correlated,
        })
    }
}

/// What the engine injects into one guest (`SimBuilder::add_chaos`).
#[derive(Clone, Debug, PartialEq)]
pub struct ChaosSpec {
    /// Fraction of time stolen, in (0, 1).
    pub rate: f64,
    pub dist: ChaosDist,
    /// Mean stall, ns.
    pub mean_ns: f64,
    /// Stream name; vCPU `k` draws from `<stream>/<k>`, or every vCPU from `<stream>` when
    /// `correlated`.
    pub stream: String,
    /// Every vCPU draws the same stalls (one stream), so they stall together.
    pub correlated: bool,
}

impl ChaosSpec {
    /// The mean gap between the end of one stall and the start of the next: stalls of mean
    /// `m` separated by gaps of mean `g` take `m / (m + g)` of the time, so `g = m (1 - r) / r`.
    pub fn mean_gap_ns(&self) -> f64 {
        self.mean_ns * (1.0 - self.rate) / self.rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_field() {
        let bad = ChaosConfig {
            rate: 1.0,
            ..Default::default()
        };
        assert_eq!(bad.validate().unwrap_err().0, "rate");
        let bad = ChaosConfig {
            rate: 0.1,
            mean_us: 0.0,
            ..Default::default()
        };
        assert_eq!(bad.validate().unwrap_err().0, "mean_us");
        assert!(ChaosConfig::default().validate().is_ok());
    }

    #[test]
    fn rate_zero_gives_no_spec_and_the_gap_matches_the_rate() {
        assert!(ChaosConfig::default().spec("d").is_none());
        let s = ChaosConfig {
            rate: 0.2,
            mean_us: 500.0,
            ..Default::default()
        }
        .spec("d")
        .unwrap();
        assert_eq!(s.stream, "chaos/d");
        let g = s.mean_gap_ns();
        assert!((s.mean_ns / (s.mean_ns + g) - 0.2).abs() < 1e-12);
    }
}
