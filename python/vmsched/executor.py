"""Where the points of a sweep or a reproduction run: the executor seam.

An `Executor` takes a picklable function and its arguments (one point) and returns a
`concurrent.futures.Future` that ends with the point's result or its exception. Callers ask for
results as they finish with `imap_unordered`, and write each as it comes, so an interrupted sweep
keeps what finished. Two executors ship:

- `InlineExecutor`: in this process, one point at a time, each run only when the caller asks for
  the next result (one job, or a single point);
- `ProcessExecutor`: a pool of local processes (`concurrent.futures.ProcessPoolExecutor`).

A cluster executor (Ray: `ray.remote(fn).remote(*args).future()` is such a Future) is one more
subclass with `submit`; nothing else changes. `make_executor(jobs)` picks the local one.
"""

from __future__ import annotations

import multiprocessing
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
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


class ProcessExecutor(Executor):
    """A pool of `jobs` local worker processes, started by `spawn`: a forked child of a process
    whose polars (Rust) thread pool is running can deadlock."""

    def __init__(self, jobs: int):
        self.jobs = jobs
        self._pool = ProcessPoolExecutor(max_workers=jobs,
                                         mp_context=multiprocessing.get_context("spawn"))

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Future:
        return self._pool.submit(fn, *args)

    def shutdown(self, cancel: bool = False) -> None:
        self._pool.shutdown(wait=True, cancel_futures=cancel)


def make_executor(jobs: int | None = None, points: int | None = None) -> Executor:
    """The local executor for `jobs` parallel runs (default: every core): inline for one job or
    at most one point, else a process pool of no more workers than points."""
    jobs = jobs or os.cpu_count() or 1
    if points is not None:
        jobs = min(jobs, points)
    if jobs <= 1:
        return InlineExecutor()
    return ProcessExecutor(jobs)
