//! `vmsched._core`: the PyO3 glue. It converts, calls and maps errors; nothing else.
//!
//! Results cross as Arrow: each of the core's result tables (`report::Results::tables`) becomes
//! an Arrow record batch behind an object with `__arrow_c_stream__` (the Arrow PyCapsule
//! interface), which polars (or pyarrow) imports without copying through Python objects.
//! Overrides arrive as Python values and become typed `SetValue`s (a `str` is command-line text,
//! read by its field's type).
//!
//! A bad scenario raises `vmsched.ScenarioError` (file, line, field, message); a panic inside the
//! core (a broken invariant) raises `vmsched.CoreError` with the panic's message and location,
//! never crosses into Python as a Rust unwind and prints nothing (a panic hook keeps quiet on the
//! threads running core code). Both classes are `vmsched.errors`' (picklable).
//!
//! Budgets: `run` (and `estimate`) compute the memory a scenario will need before building it
//! and refuse it with a `ScenarioError` naming the field when it exceeds the limit
//! (`vmsched_core::budget`).
//!
//! Ctrl-C: while the core runs (the GIL released), SIGINT also sets the core's stop flag, which
//! it looks at every `WATCH_EVERY` events; the run then raises Python's KeyboardInterrupt.

mod probe;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use arrow_array::types::UInt64Type;
use arrow_array::{
    ArrayRef, Float64Array, Int64Array, ListArray, RecordBatch, RecordBatchIterator, StringArray,
    UInt32Array, UInt64Array,
};
use arrow_schema::{Field, Schema};
use pyo3::exceptions::{PyKeyboardInterrupt, PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyCapsule, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use vmsched_core::budget::{Estimate, Limit};
use vmsched_core::report::{Column, Table};
use vmsched_core::scenario::SetValue;

/// The project's exception classes live in `vmsched.errors` (plain Python classes, so they
/// pickle across process pools); the core's errors are raised as instances of them.
fn error_class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("vmsched.errors")?.getattr(name)
}

fn raise<'py>(py: Python<'py>, class: &str, args: impl pyo3::call::PyCallArgs<'py>) -> PyErr {
    match error_class(py, class).and_then(|c| c.call1(args)) {
        Ok(e) => PyErr::from_value(e),
        Err(e) => e,
    }
}

fn core_error(msg: String) -> PyErr {
    Python::attach(|py| raise(py, "CoreError", (msg,)))
}

thread_local! {
    /// Set while this thread runs core code under `quiet`: a panic's location is kept here
    /// instead of printed.
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static PANIC_AT: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Installs (once) a panic hook that is silent on threads inside `quiet` (keeping the panic's
/// location for the exception) and defers to the previous hook everywhere else.
fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if QUIET.with(|q| q.get()) {
                let at = info
                    .location()
                    .map(|l| format!("{}:{}", l.file(), l.line()));
                PANIC_AT.with(|p| *p.borrow_mut() = at);
            } else {
                prev(info);
            }
        }));
    });
}

/// Runs `f`, turning a panic (a broken invariant in the core) into `CoreError` with the panic's
/// message and location, printing nothing to stderr.
fn quiet<T>(f: impl FnOnce() -> T) -> PyResult<T> {
    install_panic_hook();
    let was = QUIET.with(|q| q.replace(true));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    QUIET.with(|q| q.set(was));
    r.map_err(|p| {
        let at = PANIC_AT.with(|a| a.borrow_mut().take());
        let msg = panic_message(p);
        core_error(match at {
            Some(at) => format!("{msg} (at {at})"),
            None => msg,
        })
    })
}

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
    Python::attach(|py| {
        raise(
            py,
            "ScenarioError",
            (e.to_string(), e.file, e.line, e.field, e.message),
        )
    })
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
        .map(|(k, v)| match set_value(k, v) {
            Ok(x) => Ok((k.clone(), x)),
            // A value of a type overrides cannot have stays a TypeError; an integer out of
            // range is a scenario error naming its key.
            Err(e) if Python::attach(|py| e.is_instance_of::<PyTypeError>(py)) => Err(e),
            Err(e) => Err(Python::attach(|py| {
                let msg = e.value(py).to_string();
                raise(
                    py,
                    "ScenarioError",
                    (format!("{file}: {k}: {msg}"), file, None::<usize>, k, msg),
                )
            })),
        })
        .collect::<PyResult<Vec<_>>>()?;
    vmsched_sched::load_with(file, text, &typed).map_err(scenario_err)
}

/// Validates a scenario; raises ScenarioError if it is bad. Returns the scenario as JSON.
#[pyfunction]
#[pyo3(signature = (file, text, overrides=vec![]))]
fn check(file: &str, text: &str, overrides: Vec<(String, Bound<'_, PyAny>)>) -> PyResult<String> {
    let s = load(file, text, &overrides)?;
    serde_json::to_string(&s).map_err(|e| core_error(e.to_string()))
}

/// The budget check of issue 18 item 2: the estimate of `s` against the limit in force
/// (`memory_limit_mb` if given, else the scenario's `run.memory_limit_mb`, else a share of the
/// available memory); Err is a `ScenarioError` naming the field of the largest part.
fn check_budget(
    file: &str,
    s: &vmsched_sched::Scenario,
    trace_max_records: Option<usize>,
    memory_limit_mb: Option<u64>,
) -> PyResult<Estimate> {
    let est = Estimate::of(s, trace_max_records);
    let limit = Limit::resolve(memory_limit_mb, s.run.memory_limit_mb);
    est.check(&limit).map_err(|(field, message)| {
        scenario_err(vmsched_core::scenario::ScenarioError {
            file: file.to_string(),
            line: None,
            field,
            message,
        })
    })?;
    Ok(est)
}

/// What a run of the scenario will cost, before it is built (docs/limits.md): a dict with
/// `memory_bytes`, `parts` (a list of (field, what, bytes), largest first), `limit_bytes`,
/// `output_bytes` and `output_field` (the result tables, uncompressed), and `events` (None, or
/// (an upper bound of the run's events, the field that contributes most) when it is over the
/// warning threshold). Raises ScenarioError if the scenario is bad or over its memory limit.
#[pyfunction]
#[pyo3(signature = (file, text, overrides=vec![], trace_max_records=None, memory_limit_mb=None))]
fn estimate<'py>(
    py: Python<'py>,
    file: &str,
    text: &str,
    overrides: Vec<(String, Bound<'py, PyAny>)>,
    trace_max_records: Option<usize>,
    memory_limit_mb: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let s = load(file, text, &overrides)?;
    let est = check_budget(file, &s, trace_max_records, memory_limit_mb)?;
    let limit = Limit::resolve(memory_limit_mb, s.run.memory_limit_mb);
    let d = PyDict::new(py);
    d.set_item("memory_bytes", est.memory_bytes)?;
    let parts: Vec<(String, String, u64)> = est
        .parts
        .iter()
        .map(|p| (p.field.clone(), p.what.clone(), p.bytes))
        .collect();
    d.set_item("parts", parts)?;
    d.set_item("limit_bytes", limit.bytes)?;
    d.set_item("output_bytes", est.output_bytes)?;
    d.set_item("output_field", est.output_field.clone())?;
    let end = s.run.duration_ns().unwrap_or(0);
    d.set_item("events", est.events_warning(end))?;
    Ok(d)
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
        .map_err(|e| core_error(format!("result table {}: {e}", t.name)))?;
    Ok(ArrowTable { batch })
}

/// Runs a scenario. Returns a dict: `duration_ns`, `warmup_ns`, `measured_ns`, `events` and
/// `tables` (name → ArrowTable: entities, workloads, histograms, series). `progress`, if
/// given, is called with the fraction of simulated time done, about a hundred times over the
/// run; if it raises, the run stops and the exception propagates. `trace`, if given, is a path:
/// the run's schedule is written there as a Perfetto trace (at most `trace_max_records`
/// records), and the dict gets a `trace` entry with its counts. `xentrace`, if given, is a path
/// for the host level as Xen's binary trace (same records and bound; cycle counts of a CPU of
/// `xentrace_cpu_hz`, default 2.4 GHz), and the dict gets a `xentrace` entry (records written,
/// per event id, the cycles assumption, the domain ids, the trace's counts).
#[pyfunction]
#[pyo3(signature = (file, text, overrides=vec![], progress=None, trace=None, trace_max_records=None, memory_limit_mb=None, xentrace=None, xentrace_cpu_hz=None))]
#[allow(clippy::too_many_arguments)]
fn run<'py>(
    py: Python<'py>,
    file: &str,
    text: &str,
    overrides: Vec<(String, Bound<'py, PyAny>)>,
    progress: Option<Py<PyAny>>,
    trace: Option<std::path::PathBuf>,
    trace_max_records: Option<usize>,
    memory_limit_mb: Option<u64>,
    xentrace: Option<std::path::PathBuf>,
    xentrace_cpu_hz: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let s = load(file, text, &overrides)?;
    if xentrace_cpu_hz == Some(0) {
        return Err(PyValueError::new_err(
            "xentrace_cpu_hz must be positive, got 0",
        ));
    }
    // One trace channel feeds both files.
    let traced = trace.is_some() || xentrace.is_some();
    let records =
        traced.then(|| trace_max_records.unwrap_or(vmsched_core::trace::DEFAULT_MAX_RECORDS));
    check_budget(file, &s, records, memory_limit_mb)?;
    let mut sim = quiet(|| vmsched_sched::build(&s))?;
    if let Some(n) = records {
        sim.enable_trace(n);
    }
    let end = sim.end();
    let steps: u64 = if progress.is_some() { 100 } else { 1 };
    let stop = Arc::new(AtomicBool::new(false));
    sim.set_stop_flag(Some(stop.clone()));
    for k in 1..=steps {
        let until = end / steps * k + if k == steps { end % steps } else { 0 };
        let sigint = SigintFlag::register(&stop);
        let r = py.detach(|| quiet(|| sim.run_until(until)));
        drop(sigint);
        r?;
        if stop.load(Ordering::SeqCst) {
            // Python's own SIGINT handler ran too (the registry chains to it): let it raise.
            py.check_signals()?;
            return Err(PyKeyboardInterrupt::new_err("interrupted"));
        }
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
    out.set_item("log", sim.log().to_vec())?;
    let tables = PyDict::new(py);
    for t in r.tables() {
        tables.set_item(t.name, to_arrow(t)?)?;
    }
    out.set_item("tables", tables)?;
    if traced {
        let tr = sim.take_trace().expect("tracing was enabled");
        if let Some(path) = trace {
            out.set_item("trace", write_trace(py, &tr, &path)?)?;
        }
        if let Some(path) = xentrace {
            let opts = vmsched_core::trace::xentrace::XentraceOpts {
                cpu_hz: xentrace_cpu_hz.unwrap_or(vmsched_core::trace::xentrace::DEFAULT_CPU_HZ),
            };
            out.set_item("xentrace", write_xentrace(py, &tr, &opts, &path)?)?;
        }
    }
    Ok(out)
}

/// Runs a scenario again with tracing on and explains the wake-ups of `task`
/// (`vmsched_core::trace::explain`): the `worst` longest (default 5), or the one at `at_ns`.
/// Returns a dict: `task`, `total` and `measured` wake-ups, `warmup_ns`, `events` (to check
/// the run is the one that was written), `trace` (its counts) and `wakeups`, each a dict with
/// its bounds, measure, cause and `segments` (bounds, cause, rule, CPU, who ran, sentence).
/// With `window` (start, end in ns), or `pad_ns` (the first chosen wake-up widened on each
/// side by `pad_ns` or a fifth of its latency, whichever is more), also `gantt`: what every CPU of every level ran in the window
/// (`vmsched_core::trace::gantt`), as `window` and `columns` (`level`, `cpu`, `vcpu`: the host
/// entity behind a guest CPU, `ent`, `start_ns`, `end_ns`), for the HTML report.
#[pyfunction]
#[pyo3(signature = (file, text, task, overrides=vec![], worst=None, at_ns=None, trace_max_records=None, window=None, pad_ns=None))]
#[allow(clippy::too_many_arguments)]
fn explain<'py>(
    py: Python<'py>,
    file: &str,
    text: &str,
    task: &str,
    overrides: Vec<(String, Bound<'py, PyAny>)>,
    worst: Option<usize>,
    at_ns: Option<u64>,
    trace_max_records: Option<usize>,
    window: Option<(u64, u64)>,
    pad_ns: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    let (tr, warmup, events) = traced_run(py, file, text, &overrides, trace_max_records)?;
    explain_dict(py, &tr, warmup, events, task, worst, at_ns, window, pad_ns)
}

/// `explain`'s dict, from a trace already made.
#[allow(clippy::too_many_arguments)]
fn explain_dict<'py>(
    py: Python<'py>,
    tr: &vmsched_core::trace::Trace,
    warmup: u64,
    events: u64,
    task: &str,
    worst: Option<usize>,
    at_ns: Option<u64>,
    window: Option<(u64, u64)>,
    pad_ns: Option<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    use vmsched_core::trace::explain::{self as ex, Select};
    let sel = match (worst, at_ns) {
        (_, Some(t)) => Select::At(t),
        (n, None) => Select::Worst(n.unwrap_or(5)),
    };
    let e = py
        .detach(|| quiet(|| ex::explain(tr, task, sel, warmup)))?
        .map_err(PyValueError::new_err)?;
    let out = PyDict::new(py);
    out.set_item("task", ex::ent_name(tr, e.task))?;
    out.set_item("total", e.total)?;
    out.set_item("measured", e.measured)?;
    out.set_item("warmup_ns", warmup)?;
    out.set_item("events", events)?;
    out.set_item("trace", trace_counts(py, tr)?)?;
    let cpu = |c: Option<vmsched_core::ids::GCpu>| c.map(|c| ex::cpu_name(tr, c));
    let ent = |g: Option<vmsched_core::ids::GEnt>| g.map(|g| ex::ent_name(tr, g).to_string());
    let list = PyList::empty(py);
    for w in &e.wakeups {
        let d = PyDict::new(py);
        d.set_item("start_ns", w.start)?;
        d.set_item("end_ns", w.end)?;
        d.set_item("latency_ns", w.latency())?;
        d.set_item("wake_ns", w.wake)?;
        d.set_item("run_ns", w.run)?;
        d.set_item("measure", w.measure.name())?;
        d.set_item("cause", w.cause.name())?;
        d.set_item("waker_cpu", cpu(w.waker_cpu))?;
        d.set_item("cpu", cpu(Some(w.cpu)))?;
        d.set_item("measured", w.measured)?;
        let segs = PyList::empty(py);
        for sg in &w.segments {
            let g = PyDict::new(py);
            g.set_item("start_ns", sg.start)?;
            g.set_item("end_ns", sg.end)?;
            g.set_item("cause", sg.cause.name())?;
            g.set_item("rule", sg.rule_name())?;
            g.set_item("scheduler", sg.sched(tr))?;
            g.set_item("cpu", cpu(sg.cpu))?;
            g.set_item("who", ent(sg.who))?;
            g.set_item("text", sg.describe(tr, w.task))?;
            segs.append(g)?;
        }
        d.set_item("segments", segs)?;
        list.append(d)?;
    }
    out.set_item("wakeups", list)?;
    let win = window.or_else(|| {
        let w = e.wakeups.first()?;
        let pad = pad_ns?.max(w.latency() / 5);
        Some((w.start.saturating_sub(pad), w.end.saturating_add(pad)))
    });
    if let Some((a, b)) = win {
        out.set_item("gantt", gantt_columns(py, tr, a, b)?)?;
    }
    Ok(out)
}

/// Runs a scenario again with tracing on and returns what every CPU of every level ran in
/// `window` (start, end in ns), as `explain`'s `gantt`, with `events`: the HTML report's Gantt
/// chart for a run with no task wake-up to explain.
#[pyfunction]
#[pyo3(signature = (file, text, overrides=vec![], window=(0, 0), trace_max_records=None))]
fn gantt<'py>(
    py: Python<'py>,
    file: &str,
    text: &str,
    overrides: Vec<(String, Bound<'py, PyAny>)>,
    window: (u64, u64),
    trace_max_records: Option<usize>,
) -> PyResult<Bound<'py, PyDict>> {
    let (tr, _warmup, events) = traced_run(py, file, text, &overrides, trace_max_records)?;
    let out = gantt_columns(py, &tr, window.0, window.1)?;
    out.set_item("events", events)?;
    Ok(out)
}

/// The slices of every CPU in `[a, b)` (`vmsched_core::trace::gantt::slices`) as a dict:
/// `window` (a, b cut at the trace's end) and `columns`.
fn gantt_columns<'py>(
    py: Python<'py>,
    tr: &vmsched_core::trace::Trace,
    a: u64,
    b: u64,
) -> PyResult<Bound<'py, PyDict>> {
    use vmsched_core::trace::{explain as ex, gantt};
    let sl = py.detach(|| gantt::slices(tr, a, b));
    let cpu_level = |c: vmsched_core::ids::GCpu| {
        tr.meta.levels[tr.meta.cpus[c.idx()].level.idx()]
            .name
            .clone()
    };
    let cols = PyDict::new(py);
    cols.set_item(
        "level",
        sl.iter().map(|s| cpu_level(s.cpu)).collect::<Vec<_>>(),
    )?;
    cols.set_item(
        "cpu",
        sl.iter()
            .map(|s| ex::cpu_name(tr, s.cpu))
            .collect::<Vec<_>>(),
    )?;
    cols.set_item(
        "vcpu",
        sl.iter()
            .map(|s| {
                tr.meta.cpus[s.cpu.idx()]
                    .backing
                    .map(|v| ex::ent_name(tr, v).to_string())
            })
            .collect::<Vec<_>>(),
    )?;
    cols.set_item(
        "ent",
        sl.iter()
            .map(|s| ex::ent_name(tr, s.ent).to_string())
            .collect::<Vec<_>>(),
    )?;
    cols.set_item("start_ns", sl.iter().map(|s| s.start).collect::<Vec<_>>())?;
    cols.set_item("end_ns", sl.iter().map(|s| s.end).collect::<Vec<_>>())?;
    let d = PyDict::new(py);
    d.set_item("window", (a, b.min(tr.complete_until()).max(a)))?;
    d.set_item("columns", cols)?;
    Ok(d)
}

/// Runs a scenario again with tracing on and returns its attribution
/// (`vmsched_core::trace::explain::attribution`): per task and measure, the time of its measured
/// wake-up latencies by cause, rule and who ran instead, as columns (`level`, `task`,
/// `measure`, `cause`, `rule`, `who`, `ns`, `segments`, `wakeups`, `total_ns`), with `events`
/// and `trace` as for `explain`. With `latencies`, also `latencies`: per task and measure
/// (`level`, `task`, `measure`), every measured wake-up's latency (`latency_ns`, a list).
#[pyfunction]
#[pyo3(signature = (file, text, overrides=vec![], trace_max_records=None, latencies=false))]
fn attribution<'py>(
    py: Python<'py>,
    file: &str,
    text: &str,
    overrides: Vec<(String, Bound<'py, PyAny>)>,
    trace_max_records: Option<usize>,
    latencies: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let (tr, warmup, events) = traced_run(py, file, text, &overrides, trace_max_records)?;
    attribution_dict(py, &tr, warmup, events, latencies)
}

/// `attribution`'s dict, from a trace already made.
fn attribution_dict<'py>(
    py: Python<'py>,
    tr: &vmsched_core::trace::Trace,
    warmup: u64,
    events: u64,
    latencies: bool,
) -> PyResult<Bound<'py, PyDict>> {
    use vmsched_core::trace::explain as ex;
    let rows = py.detach(|| quiet(|| ex::attribution(tr, warmup)))?;
    let name = |g: vmsched_core::ids::GEnt| ex::ent_name(tr, g).to_string();
    let level = |g: vmsched_core::ids::GEnt| {
        tr.meta.levels[tr.meta.ents[g.idx()].level.idx()]
            .name
            .clone()
    };
    let cols = PyDict::new(py);
    cols.set_item(
        "level",
        rows.iter().map(|r| level(r.task)).collect::<Vec<_>>(),
    )?;
    cols.set_item(
        "task",
        rows.iter().map(|r| name(r.task)).collect::<Vec<_>>(),
    )?;
    cols.set_item(
        "measure",
        rows.iter().map(|r| r.measure.name()).collect::<Vec<_>>(),
    )?;
    cols.set_item(
        "cause",
        rows.iter().map(|r| r.cause.name()).collect::<Vec<_>>(),
    )?;
    cols.set_item("rule", rows.iter().map(|r| r.rule).collect::<Vec<_>>())?;
    cols.set_item(
        "who",
        rows.iter().map(|r| r.who.map(name)).collect::<Vec<_>>(),
    )?;
    cols.set_item("ns", rows.iter().map(|r| r.ns).collect::<Vec<_>>())?;
    cols.set_item(
        "segments",
        rows.iter().map(|r| r.segments).collect::<Vec<_>>(),
    )?;
    cols.set_item(
        "wakeups",
        rows.iter().map(|r| r.wakeups).collect::<Vec<_>>(),
    )?;
    cols.set_item(
        "total_ns",
        rows.iter().map(|r| r.total_ns).collect::<Vec<_>>(),
    )?;
    let out = PyDict::new(py);
    out.set_item("columns", cols)?;
    if latencies {
        let lat = py.detach(|| quiet(|| ex::latencies(tr, warmup)))?;
        let d = PyDict::new(py);
        d.set_item("level", lat.iter().map(|r| level(r.0)).collect::<Vec<_>>())?;
        d.set_item("task", lat.iter().map(|r| name(r.0)).collect::<Vec<_>>())?;
        d.set_item(
            "measure",
            lat.iter().map(|r| r.1.name()).collect::<Vec<_>>(),
        )?;
        d.set_item(
            "latency_ns",
            lat.into_iter().map(|r| r.2).collect::<Vec<_>>(),
        )?;
        out.set_item("latencies", d)?;
    }
    out.set_item("warmup_ns", warmup)?;
    out.set_item("events", events)?;
    out.set_item("trace", trace_counts(py, tr)?)?;
    Ok(out)
}

/// A run made once with tracing on, kept for several analyses (the HTML report's: the
/// attribution, the explained wake-ups and the Gantt chart from one run, not one run each).
#[pyclass(frozen, name = "TracedRun", module = "vmsched._core")]
struct TracedRun {
    trace: vmsched_core::trace::Trace,
    warmup: u64,
    events: u64,
}

#[pymethods]
impl TracedRun {
    /// The run's event count.
    #[getter]
    fn events(&self) -> u64 {
        self.events
    }

    /// As the function `attribution`, on this run.
    #[pyo3(signature = (latencies=false))]
    fn attribution<'py>(&self, py: Python<'py>, latencies: bool) -> PyResult<Bound<'py, PyDict>> {
        attribution_dict(py, &self.trace, self.warmup, self.events, latencies)
    }

    /// As the function `explain`, on this run.
    #[pyo3(signature = (task, worst=None, at_ns=None, window=None, pad_ns=None))]
    fn explain<'py>(
        &self,
        py: Python<'py>,
        task: &str,
        worst: Option<usize>,
        at_ns: Option<u64>,
        window: Option<(u64, u64)>,
        pad_ns: Option<u64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        explain_dict(
            py,
            &self.trace,
            self.warmup,
            self.events,
            task,
            worst,
            at_ns,
            window,
            pad_ns,
        )
    }

    /// As the function `gantt`, on this run.
    fn gantt<'py>(&self, py: Python<'py>, window: (u64, u64)) -> PyResult<Bound<'py, PyDict>> {
        let out = gantt_columns(py, &self.trace, window.0, window.1)?;
        out.set_item("events", self.events)?;
        Ok(out)
    }
}

/// Runs a scenario once with tracing on (at most `trace_max_records` records) and keeps the
/// trace for the analyses of a [`TracedRun`].
#[pyfunction]
#[pyo3(signature = (file, text, overrides=vec![], trace_max_records=None))]
fn traced<'py>(
    py: Python<'py>,
    file: &str,
    text: &str,
    overrides: Vec<(String, Bound<'py, PyAny>)>,
    trace_max_records: Option<usize>,
) -> PyResult<TracedRun> {
    let (trace, warmup, events) = traced_run(py, file, text, &overrides, trace_max_records)?;
    Ok(TracedRun {
        trace,
        warmup,
        events,
    })
}

/// Runs a scenario again with tracing on and returns the figures of `perf sched latency`
/// (`latency`: per entity of every level, from the warm-up's end) and, with `window` (start,
/// end in ns), of `perf sched timehist` (`timehist`: the runs that end in it), as columns
/// (`vmsched_core::trace::perf_sched`), with `events`, `warmup_ns` and `trace` as for
/// `explain`.
#[pyfunction]
#[pyo3(signature = (file, text, overrides=vec![], window=None, trace_max_records=None))]
fn perf_sched<'py>(
    py: Python<'py>,
    file: &str,
    text: &str,
    overrides: Vec<(String, Bound<'py, PyAny>)>,
    window: Option<(u64, u64)>,
    trace_max_records: Option<usize>,
) -> PyResult<Bound<'py, PyDict>> {
    use vmsched_core::trace::{explain as ex, perf_sched as ps};
    let (tr, warmup, events) = traced_run(py, file, text, &overrides, trace_max_records)?;
    let level = |g: vmsched_core::ids::GEnt| {
        tr.meta.levels[tr.meta.ents[g.idx()].level.idx()]
            .name
            .clone()
    };
    let name = |g: vmsched_core::ids::GEnt| ex::ent_name(&tr, g).to_string();
    let rows = py.detach(|| ps::latency(&tr, warmup));
    let lat = PyDict::new(py);
    lat.set_item(
        "level",
        rows.iter().map(|r| level(r.ent)).collect::<Vec<_>>(),
    )?;
    lat.set_item("task", rows.iter().map(|r| name(r.ent)).collect::<Vec<_>>())?;
    lat.set_item(
        "runtime_ns",
        rows.iter().map(|r| r.runtime).collect::<Vec<_>>(),
    )?;
    lat.set_item(
        "switches",
        rows.iter().map(|r| r.switches).collect::<Vec<_>>(),
    )?;
    lat.set_item("delays", rows.iter().map(|r| r.delays).collect::<Vec<_>>())?;
    lat.set_item(
        "delay_sum_ns",
        rows.iter().map(|r| r.delay_sum).collect::<Vec<_>>(),
    )?;
    lat.set_item(
        "delay_max_ns",
        rows.iter().map(|r| r.delay_max).collect::<Vec<_>>(),
    )?;
    lat.set_item(
        "max_start_ns",
        rows.iter().map(|r| r.max_start).collect::<Vec<_>>(),
    )?;
    lat.set_item(
        "max_end_ns",
        rows.iter().map(|r| r.max_end).collect::<Vec<_>>(),
    )?;
    let out = PyDict::new(py);
    out.set_item("latency", lat)?;
    if let Some((a, b)) = window {
        let th = py.detach(|| ps::timehist(&tr, a, b));
        let d = PyDict::new(py);
        d.set_item("level", th.iter().map(|r| level(r.ent)).collect::<Vec<_>>())?;
        d.set_item("time_ns", th.iter().map(|r| r.time).collect::<Vec<_>>())?;
        d.set_item(
            "cpu",
            th.iter()
                .map(|r| tr.meta.cpus[r.cpu.idx()].local)
                .collect::<Vec<_>>(),
        )?;
        d.set_item("task", th.iter().map(|r| name(r.ent)).collect::<Vec<_>>())?;
        d.set_item("wait_ns", th.iter().map(|r| r.wait).collect::<Vec<_>>())?;
        d.set_item(
            "sch_delay_ns",
            th.iter().map(|r| r.sch_delay).collect::<Vec<_>>(),
        )?;
        d.set_item("run_ns", th.iter().map(|r| r.run).collect::<Vec<_>>())?;
        out.set_item("timehist", d)?;
    }
    out.set_item("warmup_ns", warmup)?;
    out.set_item("events", events)?;
    out.set_item("trace", trace_counts(py, &tr)?)?;
    Ok(out)
}

/// Loads and runs a scenario with the trace on (at most `trace_max_records`, default 4 M);
/// returns the trace, the warm-up and the event count. Ctrl-C raises KeyboardInterrupt.
fn traced_run(
    py: Python<'_>,
    file: &str,
    text: &str,
    overrides: &[(String, Bound<'_, PyAny>)],
    trace_max_records: Option<usize>,
) -> PyResult<(vmsched_core::trace::Trace, u64, u64)> {
    let s = load(file, text, overrides)?;
    let records = trace_max_records.unwrap_or(vmsched_core::trace::DEFAULT_MAX_RECORDS);
    check_budget(file, &s, Some(records), None)?;
    let mut sim = quiet(|| vmsched_sched::build(&s))?;
    sim.enable_trace(records);
    let stop = Arc::new(AtomicBool::new(false));
    sim.set_stop_flag(Some(stop.clone()));
    let sigint = SigintFlag::register(&stop);
    let end = sim.end();
    let r = py.detach(|| quiet(|| sim.run_until(end)));
    drop(sigint);
    r?;
    if stop.load(Ordering::SeqCst) {
        py.check_signals()?;
        return Err(PyKeyboardInterrupt::new_err("interrupted"));
    }
    sim.close_intervals();
    let tr = sim.take_trace().expect("tracing was enabled");
    Ok((tr, sim.warmup(), sim.events()))
}

/// SIGINT sets `flag` while this is alive (the core looks at it every `WATCH_EVERY` events);
/// dropping it removes the action. Only while a run is in Rust: elsewhere Python's handler alone
/// turns Ctrl-C into KeyboardInterrupt.
struct SigintFlag(Option<signal_hook::SigId>);

impl SigintFlag {
    fn register(flag: &Arc<AtomicBool>) -> Self {
        // If it cannot be registered, Ctrl-C waits for the run to end, as before.
        SigintFlag(signal_hook::flag::register(signal_hook::consts::SIGINT, flag.clone()).ok())
    }
}

impl Drop for SigintFlag {
    fn drop(&mut self) {
        if let Some(id) = self.0.take() {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// Writes the run's trace to `path`; returns its counts (records kept and dropped, the bound,
/// and where it was truncated, if it was).
fn write_trace<'py>(
    py: Python<'py>,
    tr: &vmsched_core::trace::Trace,
    path: &std::path::Path,
) -> PyResult<Bound<'py, PyDict>> {
    py.detach(|| vmsched_core::trace::perfetto::write_file(tr, path))
        .map_err(|e| PyOSError::new_err(format!("trace: {}: {e}", path.display())))?;
    trace_counts(py, tr)
}

/// A trace's counts: records kept and dropped, the bound, where it was truncated.
fn trace_counts<'py>(
    py: Python<'py>,
    tr: &vmsched_core::trace::Trace,
) -> PyResult<Bound<'py, PyDict>> {
    let sum = tr.summary();
    let d = PyDict::new(py);
    d.set_item("records", sum.records)?;
    d.set_item("dropped", sum.dropped)?;
    d.set_item("max_records", sum.max_records)?;
    d.set_item("truncated_at_ns", sum.truncated_at_ns)?;
    Ok(d)
}

/// Writes the host level of the run's trace to `path` as a xentrace file; returns what was
/// written (`records`, `by_event` as (event id, count), `cpu_hz`, `domains` as (name, domain
/// id), `pools` as (name, scheduler, Xen scheduler id or None) on a machine with cpupools) and the trace's counts under `trace` (whether it was truncated).
fn write_xentrace<'py>(
    py: Python<'py>,
    tr: &vmsched_core::trace::Trace,
    opts: &vmsched_core::trace::xentrace::XentraceOpts,
    path: &std::path::Path,
) -> PyResult<Bound<'py, PyDict>> {
    let sum = py
        .detach(|| vmsched_core::trace::xentrace::write_file(tr, opts, path))
        .map_err(|e| PyOSError::new_err(format!("xentrace: {}: {e}", path.display())))?;
    let d = PyDict::new(py);
    d.set_item("records", sum.records)?;
    d.set_item("by_event", sum.by_event)?;
    d.set_item("cpu_hz", sum.cpu_hz)?;
    d.set_item("domains", sum.domains)?;
    d.set_item("pools", sum.pools)?;
    d.set_item("trace", trace_counts(py, tr)?)?;
    Ok(d)
}

/// An import note as Python gets it: (line, key, message).
type NoteTuple = (Option<usize>, String, String);

/// Reads a configuration file: `format` is "xl", "sysctl" or "rtapp"; `pcpus` the host's pCPU
/// count (xl's "all" with exclusions needs it). Returns (the scenario fragment as JSON, as TOML,
/// the notes as (line, key, message)). Raises ScenarioError naming the file, line and key.
#[pyfunction]
#[pyo3(signature = (format, path, pcpus=None))]
fn import_file(
    format: &str,
    path: std::path::PathBuf,
    pcpus: Option<u32>,
) -> PyResult<(String, String, Vec<NoteTuple>)> {
    let format: vmsched_sched::import::Format = format.parse().map_err(PyValueError::new_err)?;
    let opts = vmsched_core::import::Options { pcpus };
    let f = quiet(|| vmsched_sched::import::import_file(format, &path, &opts))?
        .map_err(scenario_err)?;
    let json = serde_json::to_string(&f.table).map_err(|e| core_error(e.to_string()))?;
    let notes = f
        .notes
        .iter()
        .map(|n| (n.line, n.key.clone(), n.message.clone()))
        .collect();
    Ok((json, f.to_toml(), notes))
}

/// A whole scenario (TOML text, checked by the loader) from fragments given as TOML text (what
/// `import_file` returns): `[machine] pcpus`, `[host] scheduler = host`, the domains.
#[pyfunction]
fn import_skeleton(host: &str, pcpus: u32, fragments: Vec<String>) -> PyResult<String> {
    quiet(|| vmsched_sched::import::skeleton_from_toml(host, pcpus, &fragments))?
        .map_err(scenario_err)
}

/// A recorded task as Python gets it: (name, pid, comm, recorded CPU ns, recorded wake-ups).
type TracedTuple = (String, u32, String, u64, u64);

/// Reads a scheduler trace's text (`format`: "perf" for `perf script --ns -F
/// comm,tid,cpu,time,event,trace`, "ftrace" for the tracefs `trace` file; `file` names it in
/// errors) into a whole replay scenario (docs/replay.md). Returns (the scenario as TOML, the
/// notes, the selected tasks). Raises ScenarioError naming the file, line and event.
#[pyfunction]
#[pyo3(signature = (format, file, text, pids=vec![], comms=vec![], scheduler="eevdf".to_string(),
                    kernel=Some("6.18".to_string()), cpus=None, observed_affinity=true,
                    pinned_guest=false))]
#[allow(clippy::too_many_arguments)]
fn import_trace(
    format: &str,
    file: &str,
    text: &str,
    pids: Vec<u32>,
    comms: Vec<String>,
    scheduler: String,
    kernel: Option<String>,
    cpus: Option<u32>,
    observed_affinity: bool,
    pinned_guest: bool,
) -> PyResult<(String, Vec<NoteTuple>, Vec<TracedTuple>)> {
    use vmsched_core::import::schedtrace;
    let fmt = match format {
        "perf" => schedtrace::TraceFormat::Perf,
        "ftrace" => schedtrace::TraceFormat::Ftrace,
        _ => {
            return Err(PyValueError::new_err(format!(
                "unknown trace format '{format}' (perf, ftrace)"
            )))
        }
    };
    let sel = schedtrace::Selection { pids, comms };
    let tr = quiet(|| schedtrace::parse(file, text, fmt, &sel))?.map_err(scenario_err)?;
    let opts = schedtrace::ScenarioOptions {
        scheduler,
        kernel,
        cpus,
        observed_affinity,
        source: format!("{format} trace {file}"),
        pinned_guest,
    };
    let toml = vmsched_core::import::write_toml(&schedtrace::scenario(&tr, &opts));
    let notes = tr
        .notes
        .iter()
        .map(|n| (n.line, n.key.clone(), n.message.clone()))
        .collect();
    let tasks = tr
        .tasks
        .iter()
        .map(|t| {
            let r = t.recorded();
            (t.name(), t.pid, t.comm.clone(), r.cpu_ns, r.wakes)
        })
        .collect();
    Ok((toml, notes, tasks))
}

/// Raises what a broken invariant in the core raises (for testing the error mapping).
#[pyfunction]
fn _panic_for_tests(msg: String) -> PyResult<()> {
    quiet(move || -> () { panic!("invariant: {msg}") })
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(explain, m)?)?;
    m.add_function(wrap_pyfunction!(attribution, m)?)?;
    m.add_function(wrap_pyfunction!(perf_sched, m)?)?;
    m.add_function(wrap_pyfunction!(gantt, m)?)?;
    m.add_function(wrap_pyfunction!(traced, m)?)?;
    m.add_class::<TracedRun>()?;
    m.add_function(wrap_pyfunction!(import_file, m)?)?;
    m.add_function(wrap_pyfunction!(import_skeleton, m)?)?;
    m.add_function(wrap_pyfunction!(import_trace, m)?)?;
    m.add_function(wrap_pyfunction!(estimate, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_for_tests, m)?)?;
    probe::register(m)?;
    m.add_class::<ArrowTable>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // A hash of the simulation's source code (build.rs): sweep point keys include it.
    m.add("__build__", env!("VMSCHED_SOURCE_HASH"))?;
    Ok(())
}
