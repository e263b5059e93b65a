"""One job runner for the studies of ``fpga/``: a local process pool by default, a
dask.distributed cluster when a scheduler address is given, and one progress bar.

A job is a module-level function of plain arguments that returns plain data and raises on
failure; :func:`call` runs it in a worker and returns an outcome (``{"ok": True, "value":
...}`` or ``{"ok": False, "error": "Type: message"}``, with where and how long it ran). An
executor runs jobs tagged by the caller and yields ``(tag, outcome)`` as they finish,
including jobs submitted while iterating; a job that could not run at all (a worker died, a
dask worker cannot import this project) comes back as a failed outcome of the same shape.
The studies see the job's value or a :class:`Failure`, the one failure shape of ``fpga/``
(:func:`result_of`, :func:`run_jobs`).
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import socket
import sys
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Callable, Iterator

__all__ = ["DASK_INSTALL_HINT", "DaskExecutor", "Failure", "JobSetupError", "LocalExecutor",
           "Progress", "call", "error_text", "make_executor", "outcome_of", "result_of",
           "run_jobs", "worker_info"]

DASK_INSTALL_HINT = "pip install 'dask[distributed]'"


class JobSetupError(ValueError):
    """Jobs cannot start: no dask for a scheduler address, no scheduler, workers that cannot
    import this project."""


def worker_info(started: float) -> dict:
    """Where and how long a job ran (merged into its outcome)."""
    return {"pid": os.getpid(), "host": socket.gethostname(),
            "seconds": time.perf_counter() - started}


def error_text(error: BaseException) -> str:
    """An exception as the text of an outcome: ``"Type: message"``."""
    return f"{type(error).__name__}: {error}"


@dataclass(frozen=True)
class Failure:
    """A job that raised or could not run: the one failure shape of the studies.

    Attributes
    ----------
    job : object
        The job's tag, as the study gave it (plain data: ``(unit, target)``, a row id,
        ``(flow, value, target)``...).
    message : str
        ``"Type: message"`` (:func:`error_text`); a tool's failure quotes its log's tail on the
        following lines.
    """

    job: object
    message: str

    @property
    def headline(self) -> str:
        """The first line of the message."""
        return (self.message.splitlines() or [""])[0]


def result_of(tag, outcome: dict):
    """The job's value, or its `Failure` (tagged `tag`) if it failed."""
    return outcome["value"] if outcome["ok"] else Failure(tag, outcome["error"])


# --------------------------------------------------------------------------- executors


def outcome_of(future) -> dict:
    """The job's dict, or a failed outcome if the job could not run at all (a worker died,
    a dask worker cannot import this project...)."""
    try:
        return future.result()
    except Exception as error:  # noqa: BLE001
        return {"ok": False, "error": error_text(error)}


class LocalExecutor:
    """Jobs in a local :class:`~concurrent.futures.ProcessPoolExecutor` of `jobs` processes.

    Workers are started with ``forkserver`` (or ``spawn``): forking a process that runs threads
    (a progress bar, a dask client in a test) is unsafe.
    """

    def __init__(self, jobs: int = 2):
        if jobs < 1:
            raise ValueError(f"jobs={jobs!r} must be at least 1")
        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("forkserver" if "forkserver" in methods
                                              else "spawn")
        self._pool = ProcessPoolExecutor(max_workers=jobs, mp_context=context)
        self._pending: dict = {}
        self.description = f"local process pool ({jobs} job{'s' if jobs > 1 else ''})"

    def submit(self, tag, function: Callable, *args) -> None:
        self._pending[self._pool.submit(function, *args)] = tag

    def completed(self) -> Iterator[tuple[object, dict]]:
        """``(tag, outcome)`` as jobs finish, including jobs submitted while iterating."""
        while self._pending:
            done, _ = wait(list(self._pending), return_when=FIRST_COMPLETED)
            for future in done:
                yield self._pending.pop(future), outcome_of(future)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


def _import_distributed():
    """Import ``distributed`` or raise `JobSetupError` saying how to install it."""
    try:
        import distributed
    except ImportError as error:
        raise JobSetupError(
            f"--scheduler needs dask.distributed, which is not installed ({error}); "
            f"install it with `{DASK_INSTALL_HINT}` or run without --scheduler "
            "(local process pool)") from None
    return distributed


class DaskExecutor:
    """Jobs on an existing dask.distributed cluster (``distributed.Client(address)``).

    The client is closed on exit; the cluster keeps running.

    Raises
    ------
    JobSetupError
        If ``distributed`` is not installed, the scheduler cannot be reached, or the workers
        cannot import this project.
    """

    def __init__(self, address: str, *, timeout_s: float = 10):
        distributed = _import_distributed()
        try:
            self._client = distributed.Client(address, timeout=f"{timeout_s}s",
                                              set_as_default=False)
        except (OSError, TimeoutError, ValueError) as error:
            raise JobSetupError(
                f"cannot connect to the dask scheduler at {address!r}: {error_text(error)}"
            ) from None
        try:
            # Stdlib function, so it unpickles on any worker: a clear error now rather than
            # every job failing with ModuleNotFoundError.
            self._client.run(importlib.import_module, __name__)
        except Exception as error:  # noqa: BLE001
            self._client.close()
            raise JobSetupError(
                f"the dask workers at {address!r} cannot import {__name__} "
                f"({error_text(error)}); start them with this project's virtual "
                "environment, where it is installed (pip install -e .)") from None
        self._as_completed = distributed.as_completed(loop=self._client.loop,
                                                         raise_errors=False)
        self._tags: dict = {}
        self.address = address
        workers = len(self._client.scheduler_info().get("workers", {}))
        self.description = f"dask cluster at {address} ({workers} worker(s) now)"

    @property
    def client(self):
        return self._client

    def submit(self, tag, function: Callable, *args) -> None:
        key = f"{function.__name__.strip('_')}-{uuid.uuid4().hex}"
        future = self._client.submit(function, *args, key=key, pure=False)
        self._tags[future.key] = tag
        self._as_completed.add(future)

    def completed(self) -> Iterator[tuple[object, dict]]:
        """``(tag, outcome)`` as jobs finish, including jobs submitted while iterating."""
        for future in self._as_completed:
            tag = self._tags.pop(future.key)
            outcome = outcome_of(future)
            future.release()
            yield tag, outcome

    def close(self) -> None:
        self._client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()


def make_executor(scheduler: str | None, jobs: int = 2) -> LocalExecutor | DaskExecutor:
    """A `DaskExecutor` on the cluster at `scheduler` if given, else a `LocalExecutor`.

    Raises
    ------
    JobSetupError
        See `DaskExecutor`.
    """
    return DaskExecutor(scheduler) if scheduler else LocalExecutor(jobs)


# --------------------------------------------------------------------------- progress


class Progress:
    """A tqdm bar on standard error, or one line per finished job if tqdm is missing."""

    def __init__(self, total: int, description: str = "sweep", *, enabled: bool = True):
        self.total, self.done, self._enabled = total, 0, enabled
        self._bar = None
        if not enabled:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            return
        self._bar = tqdm(total=total, desc=description, unit="job", file=sys.stderr,
                         dynamic_ncols=True, leave=True)

    def advance(self, message: str) -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.set_postfix_str(message, refresh=False)
            self._bar.update(1)
        elif self._enabled:
            print(f"[{self.done}/{self.total}] {message}", file=sys.stderr, flush=True)

    def drop(self, count: int) -> None:
        """Jobs that will not run after all (failed point, skipped target)."""
        if count <= 0:
            return
        self.total -= count
        if self._bar is not None:
            self._bar.total = self.total
            self._bar.refresh()

    def write(self, message: str) -> None:
        if self._bar is not None:
            self._bar.write(message, file=sys.stderr)
        elif self._enabled:
            print(message, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


# --------------------------------------------------------------------------- one way to fan out


def call(function: Callable, *args) -> dict:
    """Run ``function(*args)`` as a job: ``{"ok": True, "value": ...}`` or ``{"ok": False,
    "error": "Type: message"}``, with :func:`worker_info`. Submit it with the function as its
    first argument (a module-level function, so that it pickles)."""
    started = time.perf_counter()
    try:
        outcome = {"ok": True, "value": function(*args)}
    except Exception as error:  # noqa: BLE001 - every failure comes back as an outcome
        outcome = {"ok": False, "error": error_text(error)}
    return {**outcome, **worker_info(started)}


def run_jobs(jobs, *, workers: int = 2, scheduler: str | None = None
             ) -> Iterator[tuple[int, int, object, object]]:
    """Run ``jobs`` (``(tag, function, *args)`` tuples) through :func:`call` on
    :func:`make_executor`'s executor and yield ``(done, total, tag, result)`` as each
    finishes (``done`` counting from 1; ``result`` the job's value or its `Failure`): the
    fan-out of the area, Fmax, report and AccLLM studies."""
    jobs = list(jobs)
    if not jobs:
        return
    with make_executor(scheduler, min(workers, len(jobs))) as executor:
        for tag, function, *args in jobs:
            executor.submit(tag, call, function, *args)
        for done, (tag, outcome) in enumerate(executor.completed(), start=1):
            yield done, len(jobs), tag, result_of(tag, outcome)
