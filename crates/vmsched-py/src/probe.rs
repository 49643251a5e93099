//! The microbenchmarks of `vmsched-probe` as `vmsched._core.probe_*`: each takes its counts,
//! runs with the GIL released and returns a dict of its `Stats` (median_ns, p10_ns, p90_ns,
//! min_ns, max_ns, reps); a failed system call raises OSError with its message.

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use vmsched_probe::Stats;

fn out<'py>(py: Python<'py>, r: Result<Stats, String>) -> PyResult<Bound<'py, PyDict>> {
    let s = r.map_err(PyOSError::new_err)?;
    let d = PyDict::new(py);
    d.set_item("median_ns", s.median_ns)?;
    d.set_item("p10_ns", s.p10_ns)?;
    d.set_item("p90_ns", s.p90_ns)?;
    d.set_item("min_ns", s.min_ns)?;
    d.set_item("max_ns", s.max_ns)?;
    d.set_item("reps", s.reps)?;
    Ok(d)
}

/// A null system call (getppid).
#[pyfunction]
fn probe_syscall(py: Python<'_>, reps: u32, iters: u32) -> PyResult<Bound<'_, PyDict>> {
    out(py, py.detach(|| vmsched_probe::syscall(reps, iters)))
}

/// One pipe operation (a write or a read of one word, no wake-up).
#[pyfunction]
fn probe_pipe_op(py: Python<'_>, reps: u32, iters: u32) -> PyResult<Bound<'_, PyDict>> {
    out(py, py.detach(|| vmsched_probe::pipe_op(reps, iters)))
}

/// Context1's round trip between two processes; `cpus`: (parent's CPU, child's CPU) or None.
#[pyfunction]
#[pyo3(signature = (reps, iters, cpus=None))]
fn probe_round_trip(
    py: Python<'_>,
    reps: u32,
    iters: u32,
    cpus: Option<(u32, u32)>,
) -> PyResult<Bound<'_, PyDict>> {
    out(
        py,
        py.detach(|| vmsched_probe::round_trip(reps, iters, cpus)),
    )
}

/// A task switch on `cpu` (lmbench lat_ctx's method).
#[pyfunction]
fn probe_ctxsw(py: Python<'_>, reps: u32, iters: u32, cpu: u32) -> PyResult<Bound<'_, PyDict>> {
    out(py, py.detach(|| vmsched_probe::ctxsw(reps, iters, cpu)))
}

/// Wake-up to running of a reader on `wakee_cpu` written to from `waker_cpu`.
#[pyfunction]
fn probe_wakeup(
    py: Python<'_>,
    reps: u32,
    iters: u32,
    waker_cpu: u32,
    wakee_cpu: u32,
) -> PyResult<Bound<'_, PyDict>> {
    out(
        py,
        py.detach(|| vmsched_probe::wakeup(reps, iters, waker_cpu, wakee_cpu)),
    )
}

/// clock_nanosleep overshoot at `interval_ns` with timer slack `slack_ns` (0: 1 ns).
#[pyfunction]
fn probe_timer(
    py: Python<'_>,
    reps: u32,
    iters: u32,
    interval_ns: u64,
    slack_ns: u64,
) -> PyResult<Bound<'_, PyDict>> {
    out(
        py,
        py.detach(|| vmsched_probe::timer(reps, iters, interval_ns, slack_ns)),
    )
}

/// The timer-expiry path from a thread pinned to `cpu` (FIFO when permitted): its stats and
/// `fifo`, whether the thread ran SCHED_FIFO.
#[pyfunction]
fn probe_timer_expiry(
    py: Python<'_>,
    reps: u32,
    iters: u32,
    interval_ns: u64,
    cpu: u32,
) -> PyResult<Bound<'_, PyDict>> {
    let r = py.detach(|| vmsched_probe::timer_expiry(reps, iters, interval_ns, cpu));
    let (s, fifo) = r.map_err(PyOSError::new_err)?;
    let d = out(py, Ok(s))?;
    d.set_item("fifo", fifo)?;
    Ok(d)
}

/// The CPUs this process may run on.
#[pyfunction]
fn probe_allowed_cpus() -> PyResult<Vec<u32>> {
    vmsched_probe::allowed_cpus().map_err(PyOSError::new_err)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(probe_syscall, m)?)?;
    m.add_function(wrap_pyfunction!(probe_pipe_op, m)?)?;
    m.add_function(wrap_pyfunction!(probe_round_trip, m)?)?;
    m.add_function(wrap_pyfunction!(probe_ctxsw, m)?)?;
    m.add_function(wrap_pyfunction!(probe_wakeup, m)?)?;
    m.add_function(wrap_pyfunction!(probe_timer, m)?)?;
    m.add_function(wrap_pyfunction!(probe_timer_expiry, m)?)?;
    m.add_function(wrap_pyfunction!(probe_allowed_cpus, m)?)?;
    Ok(())
}
