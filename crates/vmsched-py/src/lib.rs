//! `vmsched._core`: the PyO3 glue. It converts, calls and maps errors; nothing else.
//!
//! Results cross as Arrow: each of the core's result tables (`report::Results::tables`) becomes
//! an Arrow record batch behind an object with `__arrow_c_stream__` (the Arrow PyCapsule
//! interface), which polars (or pyarrow) imports without copying through Python objects.
//! Overrides arrive as Python values and become typed `SetValue`s (a `str` is command-line text,
//! read by its field's type).
//!
//! A bad scenario raises `vmsched.ScenarioError` (file, line, field, message); a panic inside the
//! core (a broken invariant) raises `vmsched.CoreError` with the panic's message and never
//! crosses into Python as a Rust unwind.

use std::sync::Arc;

use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::types::UInt64Type;
use arrow_array::{
    ArrayRef, Float64Array, Int64Array, ListArray, RecordBatch, RecordBatchIterator, StringArray,
    UInt32Array, UInt64Array,
};
use arrow_schema::{Field, Schema};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyCapsule, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use vmsched_core::report::{Column, Table};
use vmsched_core::scenario::SetValue;

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

/// A Python override value as a typed `SetValue`: bool, int, float, list/tuple, or str (text,
/// read by its field's type as on a command line).
fn set_value(key: &str, v: &Bound<'_, PyAny>) -> PyResult<SetValue> {
    if v.is_instance_of::<PyBool>() {
        Ok(SetValue::Bool(v.extract()?))
    } else if v.is_instance_of::<PyInt>() {
        v.extract().map(SetValue::Int).map_err(|_| {
            PyValueError::new_err(format!("--set {key}: the integer {v} is out of range"))
        })
    } else if v.is_instance_of::<PyFloat>() {
        Ok(SetValue::Float(v.extract()?))
    } else if v.is_instance_of::<PyString>() {
        Ok(SetValue::Text(v.extract()?))
    } else if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        v.try_iter()?
            .map(|x| set_value(key, &x?))
            .collect::<PyResult<_>>()
            .map(SetValue::List)
    } else {
        Err(PyTypeError::new_err(format!(
            "--set {key}: expected a bool, int, float, str or list, got {}",
            v.get_type().name()?
        )))
    }
}

fn load(
    file: &str,
    text: &str,
    overrides: &[(String, Bound<'_, PyAny>)],
) -> PyResult<vmsched_sched::Scenario> {
    let typed = overrides
        .iter()
        .map(|(k, v)| Ok((k.clone(), set_value(k, v)?)))
        .collect::<PyResult<Vec<_>>>()?;
    vmsched_sched::load_with(file, text, &typed).map_err(scenario_err)
}

/// Validates a scenario; raises ScenarioError if it is bad. Returns the scenario as JSON.
#[pyfunction]
#[pyo3(signature = (file, text, overrides=vec![]))]
fn check(file: &str, text: &str, overrides: Vec<(String, Bound<'_, PyAny>)>) -> PyResult<String> {
    let s = load(file, text, &overrides)?;
    serde_json::to_string(&s).map_err(|e| CoreError::new_err(e.to_string()))
}

/// One result table as an Arrow record batch; `__arrow_c_stream__` exports it.
#[pyclass(frozen, name = "ArrowTable", module = "vmsched._core")]
struct ArrowTable {
    batch: RecordBatch,
}

#[pymethods]
impl ArrowTable {
    /// The Arrow PyCapsule interface: a stream of this one batch. A requested schema is ignored
    /// (the protocol allows it): the consumer casts if it must.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let reader = RecordBatchIterator::new([Ok(self.batch.clone())], self.batch.schema());
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }

    fn __len__(&self) -> usize {
        self.batch.num_rows()
    }

    #[getter]
    fn column_names(&self) -> Vec<String> {
        let schema = self.batch.schema();
        schema.fields().iter().map(|f| f.name().clone()).collect()
    }
}

fn to_arrow(t: Table) -> PyResult<ArrowTable> {
    let mut fields = Vec::with_capacity(t.columns.len());
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(t.columns.len());
    for (name, c) in t.columns {
        let nullable = matches!(c, Column::OptU64(_) | Column::OptF64(_));
        let a: ArrayRef = match c {
            Column::Str(v) => Arc::new(StringArray::from(v)),
            Column::U32(v) => Arc::new(UInt32Array::from(v)),
            Column::U64(v) => Arc::new(UInt64Array::from(v)),
            Column::I64(v) => Arc::new(Int64Array::from(v)),
            Column::F64(v) => Arc::new(Float64Array::from(v)),
            Column::OptU64(v) => Arc::new(UInt64Array::from(v)),
            Column::OptF64(v) => Arc::new(Float64Array::from(v)),
            Column::ListU64(v) => Arc::new(ListArray::from_iter_primitive::<UInt64Type, _, _>(
                v.into_iter().map(|l| Some(l.into_iter().map(Some))),
            )),
        };
        fields.push(Field::new(name, a.data_type().clone(), nullable));
        arrays.push(a);
    }
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
        .map_err(|e| CoreError::new_err(format!("result table {}: {e}", t.name)))?;
    Ok(ArrowTable { batch })
}

/// Runs a scenario. Returns a dict: `duration_ns`, `warmup_ns`, `measured_ns`, `events` and
/// `tables` (name → ArrowTable: entities, workloads, histograms, series). `progress`, if
/// given, is called with the fraction of simulated time done, about a hundred times over the
/// run; if it raises, the run stops and the exception propagates. `trace`, if given, is a path:
/// the run's schedule is written there as a Perfetto trace (at most `trace_max_records`
/// records), and the dict gets a `trace` entry with its counts.
#[pyfunction]
#[pyo3(signature = (file, text, overrides=vec![], progress=None, trace=None, trace_max_records=None))]
fn run<'py>(
    py: Python<'py>,
    file: &str,
    text: &str,
    overrides: Vec<(String, Bound<'py, PyAny>)>,
    progress: Option<Py<PyAny>>,
    trace: Option<std::path::PathBuf>,
    trace_max_records: Option<usize>,
) -> PyResult<Bound<'py, PyDict>> {
    let s = load(file, text, &overrides)?;
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
    let r = sim.results();
    let out = PyDict::new(py);
    out.set_item("duration_ns", r.duration_ns)?;
    out.set_item("warmup_ns", r.warmup_ns)?;
    out.set_item("measured_ns", r.measured_ns)?;
    out.set_item("events", r.events)?;
    let tables = PyDict::new(py);
    for t in r.tables() {
        tables.set_item(t.name, to_arrow(t)?)?;
    }
    out.set_item("tables", tables)?;
    if let Some(path) = trace {
        out.set_item("trace", write_trace(py, &mut sim, &path)?)?;
    }
    Ok(out)
}

/// Writes the run's trace to `path`; returns its counts (records kept and dropped, the bound,
/// and where it was truncated, if it was).
fn write_trace<'py>(
    py: Python<'py>,
    sim: &mut vmsched_core::sim::Simulation,
    path: &std::path::Path,
) -> PyResult<Bound<'py, PyDict>> {
    let tr = sim.take_trace().expect("tracing was enabled");
    py.detach(|| vmsched_core::trace::perfetto::write_file(&tr, path))
        .map_err(|e| PyOSError::new_err(format!("trace: {}: {e}", path.display())))?;
    let sum = tr.summary();
    let d = PyDict::new(py);
    d.set_item("records", sum.records)?;
    d.set_item("dropped", sum.dropped)?;
    d.set_item("max_records", sum.max_records)?;
    d.set_item("truncated_at_ns", sum.truncated_at_ns)?;
    Ok(d)
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
    m.add_class::<ArrowTable>()?;
    m.add("ScenarioError", m.py().get_type::<ScenarioError>())?;
    m.add("CoreError", m.py().get_type::<CoreError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
