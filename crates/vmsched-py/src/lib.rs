//! `vmsched._core`: the PyO3 glue. It converts, calls and maps errors; nothing else.
//!
//! A bad scenario raises `vmsched.ScenarioError` (file, line, field, message); a panic inside the
//! core (a broken invariant) raises `vmsched.CoreError` with the panic's message and never
//! crosses into Python as a Rust unwind.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
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
/// stops and the exception propagates.
#[pyfunction]
#[pyo3(signature = (file, text, overrides=vec![], progress=None))]
fn run(
    py: Python<'_>,
    file: &str,
    text: &str,
    overrides: Vec<(String, String)>,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let s = vmsched_sched::load(file, text, &overrides).map_err(scenario_err)?;
    let mut sim = std::panic::catch_unwind(|| vmsched_sched::build(&s))
        .map_err(|p| CoreError::new_err(panic_message(p)))?;
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
    serde_json::to_string(&sim.results()).map_err(|e| CoreError::new_err(e.to_string()))
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
