"""Where independent tasks run: one interface, two implementations.

* :class:`LocalPool`: a pool of fresh processes on this machine (``spawn``: no state forked
  from the caller), as many as there are cores unless told otherwise;
* :class:`RayPool`: Ray tasks, on a local Ray instance this process starts (and stops) or on
  an existing cluster given by its address (``ray://host:10001`` or ``host:6379``).  Ray is
  the optional extra ``cluster``.

A task is a module-level function and picklable arguments; it returns a picklable value.
``run`` yields ``(key, value or exception)`` as tasks finish; ``close`` stops what is left.
"""

from __future__ import annotations

import os
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any, Callable, Iterator, Protocol

from ..errors import Mc2fmuError

#: torch threads per task (a seed of ``train --seeds``, a batch job): fixed, so a task's result
#: does not depend on the machine (torch's default, one thread per core, changes the float
#: summation order and so the trained model); the tasks fill the cores as processes
TASK_THREADS = 1
#: torch threads of one training run alone (``train``, ``convert``, ``demo``; ``train
#: --threads``): fixed for the same reason.  Measured on this 2-core machine, 400 L-BFGS
#: iterations on every triplet, 2 threads against 1: the four-bar 1.29x, the five-bar 1.43x,
#: the hexapod 1.36x faster (benchmarks/scaling.py has the whole trainings)
TRAIN_THREADS = 2
MAX_THREADS = 64
_task_threads: int | None = None  # set in a task's process by _with_threads


class ClusterError(Mc2fmuError):
    """Ray is missing, or the cluster cannot be reached."""


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


class Executor(Protocol):
    slots: int

    def run(self, fn: Callable, tasks: dict[str, tuple]) -> Iterator[tuple[str, Any]]: ...

    def close(self) -> None: ...


def _with_threads(fn: Callable, threads: int, args: tuple):
    import torch

    global _task_threads
    _task_threads = threads
    torch.set_num_threads(threads)
    return fn(*args)


def training_threads(requested: int | None = None) -> int:
    """The torch threads a training runs on: ``requested``, else the task's (inside a
    :class:`LocalPool` or :class:`RayPool` task), else ``$MC2FMU_TRAIN_THREADS``, else
    :data:`TRAIN_THREADS`."""
    if requested is not None:
        if isinstance(requested, bool) or not isinstance(requested, int) or not 1 <= requested <= MAX_THREADS:
            raise Mc2fmuError(f"threads={requested!r}: give a whole number of torch threads from 1 to {MAX_THREADS}")
        return requested
    if _task_threads:
        return _task_threads
    text = os.environ.get("MC2FMU_TRAIN_THREADS", "").strip()
    if not text:
        return TRAIN_THREADS
    if not (text.isascii() and text.isdecimal()) or not 1 <= int(text) <= MAX_THREADS:
        raise Mc2fmuError(f"$MC2FMU_TRAIN_THREADS={text!r}: give a whole number of torch threads from 1 to "
                          f"{MAX_THREADS}, or unset it (default {TRAIN_THREADS})")
    return int(text)


class LocalPool:
    """Fresh processes on this machine, ``slots`` at a time (default: one per core)."""

    def __init__(self, slots: int | None = None, threads: int = TASK_THREADS):
        import multiprocessing

        self.slots = max(1, slots or cores())
        self.threads = threads
        self._pool = ProcessPoolExecutor(self.slots, mp_context=multiprocessing.get_context("spawn"))

    def run(self, fn: Callable, tasks: dict[str, tuple], cpus: dict[str, int] | None = None
            ) -> Iterator[tuple[str, Any]]:
        """At most ``slots`` tasks in flight: after Ctrl-C no queued task starts (a pool's
        queue would start one more).  ``cpus`` is for Ray; here every task takes one slot."""
        queued = list(tasks.items())
        futures: dict = {}
        while queued or futures:
            while queued and len(futures) < self.slots:
                key, args = queued.pop(0)
                futures[self._pool.submit(_with_threads, fn, self.threads, args)] = key
            done, _ = wait(set(futures), return_when=FIRST_COMPLETED)
            for f in done:
                key = futures.pop(f)
                exc = f.exception()
                yield key, (exc if exc is not None else f.result())

    def close(self, wait_for_tasks: bool = True) -> None:
        self._pool.shutdown(wait=wait_for_tasks, cancel_futures=True)


#: seconds to wait for a Ray cluster's port to accept a connection
CONNECT_TIMEOUT = 10.0


def unreachable(address: str, timeout: float = CONNECT_TIMEOUT) -> str | None:
    """Why nothing answers at a Ray address (None: its port accepts a TCP connection, or the
    address is not ``[ray://]HOST:PORT``, which ``ray.init`` then judges itself).  Checked
    before ``ray.init``, which otherwise retries for many minutes."""
    import socket

    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return None
    host = host.strip("[]")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return None
    except (OSError, ValueError, OverflowError) as exc:
        return f"nothing answers at {host}:{port} ({getattr(exc, 'strerror', None) or exc})"


class RayPool:
    """Ray tasks, one CPU and ``threads`` torch threads each.  ``address`` None: a local Ray
    instance (started here, stopped by ``close``), on the loopback only."""

    def __init__(self, address: str | None = None, threads: int = TASK_THREADS, num_cpus: int | None = None):
        reach_problem = unreachable(address) if address else None  # before Ray's import, which takes seconds
        if reach_problem:
            raise ClusterError(f"--ray {address}: {reach_problem}; check the address (ray://HOST:10001 or "
                               "HOST:6379) and that the cluster is running")
        try:
            import ray
        except ImportError:
            raise ClusterError("Ray is not installed: install the extra with `pip install -e \".[cluster]\"` "
                               "(or `pip install ray`)") from None
        self.ray, self.threads, self.started = ray, threads, False
        try:
            if address:
                ray.init(address=address, log_to_driver=False, logging_level="ERROR")
            else:  # a new instance, never one found through RAY_ADDRESS or a `ray start` on this node
                ray.init(address="local", num_cpus=num_cpus or cores(), include_dashboard=False, log_to_driver=False,
                         logging_level="ERROR", _node_ip_address="127.0.0.1")
                self.started = True
        except Exception as exc:  # ray raises ConnectionError, RuntimeError, ValueError, ...
            where = f"the Ray cluster at {address}" if address else "a local Ray instance"
            raise ClusterError(f"cannot start or reach {where}: {exc}; check the address (ray://HOST:10001 or "
                               "HOST:6379) and that the cluster runs the same Ray and Python versions") from None
        self.slots = max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._remote = ray.remote(num_cpus=1, max_retries=0)(_with_threads)
        self._refs: dict = {}

    def run(self, fn: Callable, tasks: dict[str, tuple], cpus: dict[str, int] | None = None
            ) -> Iterator[tuple[str, Any]]:
        """``cpus``: the CPUs a task reserves (default 1), e.g. a job that trains seeds in a pool."""
        ray = self.ray
        cpus = cpus or {}
        self._refs = {self._remote.options(num_cpus=cpus.get(key, 1)).remote(fn, self.threads, args): key
                      for key, args in tasks.items()}
        pending = list(self._refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            for ref in done:
                try:
                    value = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    value = exc.cause if isinstance(exc.cause, BaseException) else exc
                except Exception as exc:  # a worker that died, a cancelled task
                    value = exc
                yield self._refs[ref], value

    def close(self, wait_for_tasks: bool = True) -> None:
        """``wait_for_tasks`` False: cancel the tasks and wait (up to a minute) until they are gone,
        so that nothing writes after this returns."""
        ray = self.ray
        if not wait_for_tasks and self._refs:
            for ref in self._refs:
                try:
                    ray.cancel(ref, force=True)
                except Exception:
                    pass
            try:
                ray.wait(list(self._refs), num_returns=len(self._refs), timeout=60)
            except Exception:
                pass
        if self.started or ray.is_initialized():
            ray.shutdown()
