//! `vmsched._core`: the PyO3 glue. It converts, calls and maps errors; nothing else.
//!
//! A bad scenario raises `vmsched.ScenarioError` (file, line, field, message); a panic inside the
//! core (a broken invariant) raises `vmsched.CoreError` with the panic's message and never
//! crosses into Python as a Rust unwind.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyOSError};
use pyo3::prelude::*;

create_exception!(
    _core,
    ScenarioError,
    PyException,
    "A scenario file failed to load."
);
create_exception!(
    _core,
    CoreError,
    PyException,
    "The simulation core broke an invariant."
);

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".into()
    }
}

fn scenario_err(e: vmsched_core::scenario::ScenarioError) -> PyErr {
    ScenarioError::new_err((e.to_string(), e.file, e.line, e.field, e.message))
}

/// Validates a scenario; raises ScenarioError if it is bad. Returns the scenario as JSON.
#[pyfunction]
#[pyo3(signature = (file, text, overrides=vec![]))]
fn check(file: &str, text: &str, overrides: Vec<(String, String)>) -> PyResult<String> {
    let s = vmsched_sched::load(file, text, &overrides).map_err(scenario_err)?;
    serde_json::to_string(&s).map_err(|e| CoreError::new_err(e.to_string()))
}

/// Runs a scenario and returns its results as JSON. `progress`, if given, is called with the
/// fraction of simulated time done, about a hundred times over the run; if it raises, the run
/// stops and the exception propagates. `trace`, if given, is a path: the run's schedule is
/// written there as a Perfetto trace (at most `trace_max_records` records), and the results get
/// a `trace` entry with its counts.
#[pyfunction]
#[pyo3(signature = (file, text, overrides=vec![], progress=None, trace=None, trace_max_records=None))]
fn run(
    py: Python<'_>,
    file: &str,
    text: &str,
    overrides: Vec<(String, String)>,
    progress: Option<Py<PyAny>>,
    trace: Option<std::path::PathBuf>,
    trace_max_records: Option<usize>,
) -> PyResult<String> {
    let s = vmsched_sched::load(file, text, &overrides).map_err(scenario_err)?;
    let mut sim = std::panic::catch_unwind(|| vmsched_sched::build(&s))
        .map_err(|p| CoreError::new_err(panic_message(p)))?;
    if trace.is_some() {
        sim.enable_trace(trace_max_records.unwrap_or(vmsched_core::trace::DEFAULT_MAX_RECORDS));
    }
    let end = sim.end();
    let steps: u64 = if progress.is_some() { 100 } else { 1 };
    for k in 1..=steps {
        let until = end / steps * k + if k == steps { end % steps } else { 0 };
        py.detach(|| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sim.run_until(until)))
        })
        .map_err(|p| CoreError::new_err(panic_message(p)))?;
        if let Some(cb) = &progress {
            cb.call1(py, (k as f64 / steps as f64,))?;
        }
    }
    sim.close_intervals();
    if let Some(path) = trace {
        return traced_results(py, &mut sim, &path);
    }
    serde_json::to_string(&sim.results()).map_err(|e| CoreError::new_err(e.to_string()))
}

/// Writes the run's trace to `path` and returns the results with a `trace` entry (its counts).
fn traced_results(
    py: Python<'_>,
    sim: &mut vmsched_core::sim::Simulation,
    path: &std::path::Path,
) -> PyResult<String> {
    let tr = sim.take_trace().expect("tracing was enabled");
    py.detach(|| vmsched_core::trace::perfetto::write_file(&tr, path))
        .map_err(|e| PyOSError::new_err(format!("trace: {}: {e}", path.display())))?;
    let mut v =
        serde_json::to_value(sim.results()).map_err(|e| CoreError::new_err(e.to_string()))?;
    v["trace"] =
        serde_json::to_value(tr.summary()).map_err(|e| CoreError::new_err(e.to_string()))?;
    serde_json::to_string(&v).map_err(|e| CoreError::new_err(e.to_string()))
}

/// Raises what a broken invariant in the core raises (for testing the error mapping).
#[pyfunction]
fn _panic_for_tests(msg: String) -> PyResult<()> {
    std::panic::catch_unwind(move || -> () { panic!("invariant: {msg}") })
        .map_err(|p| CoreError::new_err(panic_message(p)))
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_for_tests, m)?)?;
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    m.add("CoreError", m.py().get_type::<CoreError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
