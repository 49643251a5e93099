"""Where the points of a sweep or a reproduction run: the executor seam.

An `Executor` takes a picklable function and its arguments (one point) and returns a
`concurrent.futures.Future` that ends with the point's result or its exception. Callers ask for
results as they finish with `imap_unordered`, and write each as it comes, so an interrupted sweep
keeps what finished. Two executors ship:

- `InlineExecutor`: in this process, one point at a time, each run only when the caller asks for
  the next result (one job, or a single point);
- `ProcessExecutor`: a pool of local worker processes, which retries a point whose worker
  died and never outlives its parent (see its doc).

- `RayExecutor`: Ray tasks on a cluster, or on a local Ray instance (an optional extra,
  `pip install vmsched[ray]`; see its doc).

`make_executor(jobs, points, executor)` picks one: the local ones by `jobs`, or Ray.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, CancelledError, Future, as_completed
from concurrent.futures import wait as futures_wait
from multiprocessing.connection import wait as mp_wait
from typing import Any, TypeVar

T = TypeVar("T")


class Executor(ABC):
    """Runs points: `submit(fn, *args)` → a Future of `fn(*args)`. Use it as a context manager;
    leaving it by an exception cancels the points that have not started."""

    @abstractmethod
    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Future:
        """Starts `fn(*args)` (or queues it) and returns its Future."""

    def imap_unordered(self, fn: Callable[..., Any],
                       items: Iterable[T]) -> Iterator[tuple[T, Future]]:
        """Runs `fn(*item)` for every item (a tuple of arguments) and yields (item, done Future)
        in the order they finish. `future.result()` returns the result or raises its error."""
        futures = {self.submit(fn, *item): item for item in items}
        for f in as_completed(futures):
            yield futures[f], f

    def shutdown(self, cancel: bool = False) -> None:
        """Waits for running points and frees the workers; `cancel` drops the queued ones."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.shutdown(cancel=exc_type is not None)


class InlineExecutor(Executor):
    """Runs each point in this process when it is submitted (by `imap_unordered`: when the
    caller asks for the next one, so results are handled before the next point starts)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Future:
        f: Future = Future()
        try:
            f.set_result(fn(*args))
        except Exception as e:  # a point's error travels in its Future, as from a pool
            f.set_exception(e)
        return f

    def imap_unordered(self, fn: Callable[..., Any],
                       items: Iterable[T]) -> Iterator[tuple[T, Future]]:
        for item in items:
            yield item, self.submit(fn, *item)


class WorkerDied(RuntimeError):
    """The worker process running a point died (killed by a signal, out of memory, a crash)
    as many times as the point was tried. Picklable; `str(e)` is one line."""


def _set_parent_death_signal() -> None:
    """Linux: the kernel sends this process SIGKILL when the thread that started it ends (the
    pool's manager thread, or the whole parent process, however it died). Elsewhere a no-op;
    the lifeline pipe (`_watch_lifeline`) covers it."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _watch_lifeline(lifeline) -> None:
    """Ends this worker when its parent is gone: the parent holds the only other end of the
    lifeline pipe, which reads end-of-file when the parent exits or is killed."""
    try:
        lifeline.recv()
    except (EOFError, OSError):
        pass
    os._exit(1)


def _worker(conn, lifeline, parent_pid: int) -> None:
    """A worker process: runs (fn, args) messages from `conn` one at a time and sends back
    ("ok", result) or ("err", exception). Ctrl-C is its parent's business."""
    _set_parent_death_signal()
    if os.getppid() != parent_pid:  # the parent died before the signal was set
        os._exit(1)
    # Its own process group: a terminal's Ctrl-C (SIGINT to the foreground group) reaches the
    # parent only, which stops the sweep and kills the workers. (Ignoring SIGINT would not do:
    # the core installs its own SIGINT action while it runs, for `vmsched.run`'s stop flag.)
    # SIGINT, blocked since the start, is ignored and unblocked once the group is left.
    if hasattr(os, "setpgid"):
        os.setpgid(0, 0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    threading.Thread(target=_watch_lifeline, args=(lifeline,), daemon=True).start()
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        fn, args = msg
        try:
            out = ("ok", fn(*args))
        except Exception as e:  # the point's error travels back to its Future
            out = ("err", e)
        try:
            conn.send(out)
        except Exception as e:  # an unpicklable result or error: its text goes instead
            conn.send(("err", RuntimeError(f"{type(e).__name__}: {e} (sending back "
                                           f"{type(out[1]).__name__}: {out[1]})")))


class _Task:
    __slots__ = ("future", "fn", "args", "tries")

    def __init__(self, future: Future, fn, args):
        self.future, self.fn, self.args, self.tries = future, fn, args, 0


class _Proc:
    """One worker process, its command pipe, its lifeline and the task it runs."""

    def __init__(self, ctx):
        self.conn, child = ctx.Pipe()
        life_child, self.lifeline = ctx.Pipe(duplex=False)
        self.process = ctx.Process(target=_worker, args=(child, life_child, os.getpid()),
                                   daemon=True)
        self.process.start()
        child.close()
        life_child.close()
        self.task: _Task | None = None

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join()
        self.close()

    def close(self) -> None:
        self.conn.close()
        self.lifeline.close()


class ProcessExecutor(Executor):
    """A pool of `jobs` local worker processes, started by `spawn` (a forked child of a
    process whose polars (Rust) thread pool is running can deadlock), driven by one manager
    thread.

    Faults (docs/python.md, Sweeps under faults):
    - a worker that dies while running a point (a signal, the OOM killer) is replaced and the
      point is tried again, up to `tries` times in all; then its Future ends with
      `WorkerDied`. The other points go on;
    - the workers end with their parent however it ends: on Linux the kernel kills them when
      the manager thread or the parent process ends (`PR_SET_PDEATHSIG`), and everywhere a
      lifeline pipe whose other end only the parent holds reads end-of-file;
    - the workers run in process groups of their own, so a terminal's Ctrl-C interrupts the
      caller only, which leaves the executor by its exception (`shutdown(cancel=True)`):
      queued points are dropped and the workers are killed at once."""

    def __init__(self, jobs: int, tries: int = 3):
        self.jobs = jobs
        self.tries = tries
        self._ctx = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._queue: deque[_Task] = deque()
        self._closing = False
        self._cancel = False
        self._wake_r, self._wake_w = self._ctx.Pipe(duplex=False)
        self._thread = threading.Thread(target=self._manage, name="vmsched-pool", daemon=True)
        self._thread.start()

    def imap_unordered(self, fn: Callable[..., Any],
                       items: Iterable[T]) -> Iterator[tuple[T, Future]]:
        """As `Executor.imap_unordered`, waiting in short slices: a SIGINT that the kernel
        gives to another thread (a progress bar's, a polars pool's) only sets Python's flag,
        which the main thread sees when its wait returns, so Ctrl-C takes effect at once."""
        pending = {self.submit(fn, *item): item for item in items}
        while pending:
            done, _ = futures_wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            for f in done:
                yield pending.pop(f), f

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Future:
        f: Future = Future()
        with self._lock:
            if self._closing:
                raise RuntimeError("submit after shutdown")
            self._queue.append(_Task(f, fn, args))
        self._wake()
        return f

    def _wake(self) -> None:
        try:
            self._wake_w.send_bytes(b"w")
        except OSError:
            pass

    def shutdown(self, cancel: bool = False) -> None:
        with self._lock:
            self._closing = True
            self._cancel = self._cancel or cancel
        self._wake()
        self._thread.join()
        self._wake_w.close()
        self._wake_r.close()

    def _manage(self) -> None:
        # Workers start from this thread with SIGINT blocked (they inherit the mask), so a
        # Ctrl-C during their start-up cannot interrupt it, until they are in a process group
        # of their own. The process's SIGINT goes to the main thread, as always.
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        procs: list[_Proc] = []
        try:
            self._loop(procs)
        except BaseException as e:
            # A bug here must not leave callers waiting: every unfinished point gets the error.
            with self._lock:
                tasks = list(self._queue) + [p.task for p in procs if p.task is not None]
                self._queue.clear()
            for t in tasks:
                if not t.future.done():
                    t.future.set_exception(RuntimeError(f"the worker pool failed: {e!r}"))
            raise
        finally:
            for p in procs:
                p.kill()

    def _loop(self, procs: list[_Proc]) -> None:
        while True:
            with self._lock:
                if self._cancel:
                    while self._queue:
                        self._queue.popleft().future.cancel()
                    for p in procs:
                        if p.task is not None:
                            p.task.future.set_exception(CancelledError())
                    return
                busy = sum(p.task is not None for p in procs)
                if self._closing and not self._queue and busy == 0:
                    for p in procs:
                        try:
                            p.conn.send(None)
                        except OSError:
                            pass
                        p.process.join()
                        p.close()
                    procs.clear()
                    return
                # Start workers for queued points, then hand each idle worker a point.
                want = min(self.jobs, busy + len(self._queue))
                while len(procs) < want:
                    procs.append(_Proc(self._ctx))
                for p in procs:
                    if p.task is None and self._queue:
                        t = self._queue.popleft()
                        if t.tries == 0 and not t.future.set_running_or_notify_cancel():
                            continue  # cancelled before it started
                        t.tries += 1
                        p.task = t
                        try:
                            p.conn.send((t.fn, t.args))
                        except Exception as e:  # an unpicklable point, or a dead worker
                            if p.process.is_alive():
                                p.task = None
                                t.future.set_exception(e)
            waits = [self._wake_r] + [p.conn for p in procs if p.task is not None] + [
                p.process.sentinel for p in procs]
            ready = mp_wait(waits)
            if self._wake_r in ready:
                while self._wake_r.poll():
                    self._wake_r.recv_bytes()
            for p in list(procs):
                dead = False
                if p.task is not None and p.conn in ready:
                    try:
                        kind, value = p.conn.recv()
                    except (EOFError, OSError):
                        dead = True  # it died before answering
                    else:
                        t, p.task = p.task, None
                        if kind == "ok":
                            t.future.set_result(value)
                        else:
                            t.future.set_exception(value)
                if dead or p.process.sentinel in ready or not p.process.is_alive():
                    if p.process.is_alive():  # its pipe broke: it cannot be used again
                        p.process.kill()
                    p.process.join()
                    procs.remove(p)
                    p.close()
                    if p.task is not None:
                        self._died(p.task, p.process.exitcode)

    def _died(self, t: _Task, exitcode: int | None) -> None:
        if t.tries < self.tries:
            with self._lock:
                self._queue.appendleft(t)
            return
        how = (f"killed by {signal.Signals(-exitcode).name}"
               if exitcode is not None and exitcode < 0 else f"exit status {exitcode}")
        t.future.set_exception(WorkerDied(
            f"the worker process running this point died ({how}) on each of its {t.tries} "
            "tries"))


class RayNotInstalled(ImportError):
    """`--ray` or `executor="ray"` without Ray installed; says what to install."""


def _import_ray():
    try:
        import ray
    except ImportError:
        raise RayNotInstalled("--ray needs Ray, an optional extra: pip install 'vmsched[ray]' "
                              "(or pip install ray)") from None
    return ray


def _ray_call(fn, args):
    """Runs one point in a Ray worker. The point's own error comes back as a value, as from
    `ProcessExecutor`'s workers (Ray would wrap it in a `RayTaskError` carrying a traceback);
    only the worker's death, or its node's, reaches Ray, which retries the task."""
    try:
        return ("ok", fn(*args))
    except Exception as e:
        return ("err", e)


class RayExecutor(Executor):
    """Points as Ray tasks (`ray.remote`), on the cluster at `address` (`"auto"`: the one this
    machine belongs to; `"ray://HOST:10001"`: a Ray client) or, with no address, on a Ray
    instance started here for the executor's life (`num_cpus`: its CPUs; default all).

    Each point is one task of one CPU. Faults: a worker process or a whole node that dies while
    running a point makes Ray run the task again elsewhere, up to `tries` times in all
    (`max_retries`); then its Future ends with `WorkerDied`. A point's own error travels back
    in its Future as it was raised. Results come back through `ObjectRef.future()`, so callers
    see them as they finish, as from the local pool. Ctrl-C (`shutdown(cancel=True)`) cancels
    every unfinished task (`ray.cancel(force=True)`).

    The function and its arguments are pickled by Ray (cloudpickle): a function of an installed
    module, as vmsched's own, travels by name, so the workers need vmsched installed (the same
    version: a sweep's point keys include it)."""

    def __init__(self, address: str | None = None, tries: int = 3, num_cpus: int | None = None):
        ray = _import_ray()
        self._ray = ray
        self.tries = tries
        self._started = False
        if not ray.is_initialized():
            kw: dict[str, Any] = {"log_to_driver": False, "include_dashboard": False,
                                  "configure_logging": False}
            if address:
                ray.init(address=address, log_to_driver=False, configure_logging=False)
            else:
                if num_cpus is not None:
                    kw["num_cpus"] = num_cpus
                ray.init(**kw)
            self._started = True
        self._remote = ray.remote(num_cpus=1, max_retries=max(tries - 1, 0),
                                  retry_exceptions=False)(_ray_call)
        self._refs: dict[Any, Future] = {}
        self._lock = threading.Lock()

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Future:
        out: Future = Future()
        out.set_running_or_notify_cancel()
        ref = self._remote.remote(fn, args)
        with self._lock:
            self._refs[ref] = out
        ref.future().add_done_callback(lambda f, ref=ref: self._finish(ref, f))
        return out

    def _finish(self, ref, f: Future) -> None:
        with self._lock:
            out = self._refs.pop(ref, None)
        if out is None or out.done():
            return
        try:
            kind, value = f.result()
        except BaseException as e:  # the task's worker or node died on every try, or cancel
            from ray.exceptions import TaskCancelledError

            if isinstance(e, (TaskCancelledError, CancelledError)):
                out.set_exception(CancelledError())
            else:
                first = " ".join(str(e).split("\n"))[:300]
                out.set_exception(WorkerDied(
                    f"the Ray worker running this point died on each of its {self.tries} "
                    f"tries ({type(e).__name__}: {first})"))
            return
        if kind == "ok":
            out.set_result(value)
        else:
            out.set_exception(value)

    def imap_unordered(self, fn: Callable[..., Any],
                       items: Iterable[T]) -> Iterator[tuple[T, Future]]:
        """As `Executor.imap_unordered`, in short waits (Ctrl-C is seen at once)."""
        pending = {self.submit(fn, *item): item for item in items}
        while pending:
            done, _ = futures_wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            for f in done:
                yield pending.pop(f), f

    def shutdown(self, cancel: bool = False) -> None:
        if cancel:
            with self._lock:
                refs = list(self._refs)
            for ref in refs:
                try:
                    self._ray.cancel(ref, force=True)
                except Exception:  # already finished, or its node is gone
                    pass
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
            self._started = False


def make_executor(jobs: int | None = None, points: int | None = None,
                  executor: str | Executor | None = None,
                  address: str | None = None) -> Executor:
    """The executor for a sweep: `executor` "ray" gives a `RayExecutor` (on the cluster at
    `address`, else a local Ray instance of `jobs` CPUs); an `Executor` is returned as it is;
    otherwise ("local", None) the local one for `jobs` parallel runs (default: every core):
    inline for one job or at most one point, else a process pool of no more workers than
    points."""
    if isinstance(executor, Executor):
        return executor
    if executor == "ray":
        return RayExecutor(address=address, num_cpus=None if address else jobs)
    if executor not in (None, "local"):
        raise ValueError(f"executor: unknown executor {executor!r} (known: 'local', 'ray')")
    jobs = jobs or os.cpu_count() or 1
    if points is not None:
        jobs = min(jobs, points)
    if jobs <= 1:
        return InlineExecutor()
    return ProcessExecutor(jobs)
