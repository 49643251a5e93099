//! Real configuration files in: the one entry point the command line, the Python binding and
//! the fuzz targets call. The readers are `vmsched_core::import` (xl.cfg, rt-app JSON, and the
//! parsing of sysctl dumps); a sysctl dump's meaning is the guest scheduler's
//! (`guest/cfs/sysctl.rs`). docs/import.md has the formats and the mapping tables.

use vmsched_core::import::{self, Fragment, Options};
use vmsched_core::scenario::ScenarioError;

/// The formats read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// A Xen xl.cfg domain file.
    Xl,
    /// A Linux sysctl / sched_features dump (the guest's CFS parameters).
    Sysctl,
    /// An rt-app JSON workload.
    Rtapp,
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "xl" => Ok(Format::Xl),
            "sysctl" => Ok(Format::Sysctl),
            "rtapp" => Ok(Format::Rtapp),
            _ => Err(format!("unknown format '{s}' (xl, sysctl, rtapp)")),
        }
    }
}

/// Reads `data` (the bytes of `file`) in `format`.
pub fn import_bytes(
    format: Format,
    file: &str,
    data: &[u8],
    opts: &Options,
) -> Result<Fragment, ScenarioError> {
    let src = import::decode(file, data)?;
    match format {
        Format::Xl => import::xlcfg::import(file, src, opts),
        Format::Sysctl => {
            crate::guest::cfs::sysctl::import(file, &import::sysctl::parse(file, src)?)
        }
        Format::Rtapp => import::rtapp::import(file, src),
    }
}

/// Reads the file at `path` in `format`.
pub fn import_file(
    format: Format,
    path: &std::path::Path,
    opts: &Options,
) -> Result<Fragment, ScenarioError> {
    let data = import::read_file(path)?;
    import_bytes(format, &path.display().to_string(), &data, opts)
}

/// A whole scenario from fragments (see `vmsched_core::import::skeleton`), as TOML text, checked
/// by the loader: an error here names the skeleton's field (a workload's affinity past the
/// guest's vCPUs, say).
pub fn skeleton(host: &str, pcpus: u32, fragments: &[Fragment]) -> Result<String, ScenarioError> {
    let text = import::write_toml(&import::skeleton(host, pcpus, fragments));
    // The text is not shown to the user yet: the field names the problem, a line would not.
    crate::load("<import>", &text, &[]).map_err(|e| ScenarioError {
        file: "the imported scenario".into(),
        line: None,
        ..e
    })?;
    Ok(text)
}

/// [`skeleton`] of fragments given as TOML text (as [`Fragment::to_toml`] writes them).
pub fn skeleton_from_toml(
    host: &str,
    pcpus: u32,
    fragments: &[String],
) -> Result<String, ScenarioError> {
    let parts = fragments
        .iter()
        .enumerate()
        .map(|(i, t)| {
            toml::from_str(t)
                .map(|table| Fragment {
                    table,
                    notes: vec![],
                })
                .map_err(|e: toml::de::Error| ScenarioError {
                    file: format!("<fragment {i}>"),
                    line: None,
                    field: String::new(),
                    message: format!("not TOML: {}", e.message()),
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    skeleton(host, pcpus, &parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skeleton_of_every_format_loads() {
        let opts = Options { pcpus: Some(4) };
        let xl = import_bytes(
            Format::Xl,
            "g.cfg",
            b"name = 'g'\nvcpus = 2\ncpus = ['0', '1-3']\ncpu_weight = 512\n",
            &opts,
        )
        .unwrap();
        let sysctl = import_bytes(
            Format::Sysctl,
            "s.txt",
            b"kernel.sched_latency_ns = 12000000\nNO_START_DEBIT\n",
            &opts,
        )
        .unwrap();
        let rtapp = import_bytes(
            Format::Rtapp,
            "a.json",
            br#"{"tasks": {"t": {"cpus": [1], "loop": 5, "run": 100, "sleep": 900}}}"#,
            &opts,
        )
        .unwrap();
        let text = skeleton("credit2", 4, &[xl, sysctl, rtapp]).unwrap();
        let s = crate::load("s.toml", &text, &[]).unwrap();
        assert_eq!(s.domains.len(), 1);
        let d = &s.domains[0];
        assert_eq!((d.name.as_str(), d.vcpus, d.weight), ("g", 2, 512));
        assert_eq!(d.vcpu_pcpus, Some(vec![vec![0], vec![1, 2, 3]]));
        assert_eq!(d.workloads.len(), 1);
        let crate::GuestSchedConfig::Cfs(p) = &d.sched else {
            panic!("the skeleton names cfs")
        };
        assert_eq!(p.sched_latency_ns, Some(12_000_000));
        assert!(!p.start_debit);
        // And it runs.
        let mut sim = crate::build(
            &crate::load("s.toml", &text, &[("run.duration_ms".into(), "20".into())]).unwrap(),
        );
        sim.run_until(sim.end());
    }

    #[test]
    fn a_skeleton_that_does_not_validate_says_why() {
        let rtapp = import_bytes(
            Format::Rtapp,
            "a.json",
            br#"{"tasks": {"t": {"cpus": [7], "run": 100, "sleep": 900}}}"#,
            &Options::default(),
        )
        .unwrap();
        let e = skeleton("credit2", 2, &[rtapp]).unwrap_err();
        assert_eq!(e.field, "domain.0.workload.0.affinity");
        assert_eq!((e.file.as_str(), e.line), ("the imported scenario", None));
        let e = skeleton("nosuch", 2, &[]).unwrap_err();
        assert_eq!(e.field, "host.scheduler");
        assert!(e.message.contains("credit2"), "{e}");
    }
}
