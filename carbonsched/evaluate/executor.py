"""Run independent pieces of work (days of a replay, periods of a backtest) in parallel.

A year-long replay or site backtest is hundreds of independent daily solves. They run on one of
two engines, chosen by name:

``local``
    Worker processes on this machine (:class:`concurrent.futures.ProcessPoolExecutor`), or the
    calling process itself when ``workers`` is 1.
``dask``
    A Dask cluster (``dask.distributed``). With ``scheduler_address`` (``tcp://host:8786``) the
    work goes to an existing cluster, whose workers must have carbonsched installed (the same
    version) and read the data at the same ``--data-dir`` path; without it a
    :class:`distributed.LocalCluster` of ``workers`` single-threaded processes is started and
    stopped around the run.

Both engines return the results in the order the work was given, so a replay gives the same
result, day by day, whichever engine ran it (``tests/test_executor.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from enum import StrEnum
from typing import Any, TypeVar

from carbonsched.errors import BackendUnavailableError, InputError, require_extra

R = TypeVar("R")

DASK_CONNECT_TIMEOUT_S = 10.0
"""How long a client waits for a Dask scheduler before giving up. [s]"""

DASK_HTTP_ADDRESS = "127.0.0.1:0"
"""Where a local Dask cluster's scheduler serves its HTTP endpoints (dashboard, ``/metrics``):
loopback, on a port the system picks, so runs sharing a machine never contend for a port."""


class ExecutorKind(StrEnum):
    """The engine that runs independent pieces of work."""

    LOCAL = "local"
    """Processes on this machine."""
    DASK = "dask"
    """A Dask cluster: an existing one (``scheduler_address``) or a local one."""


def parse_executor(name: str) -> ExecutorKind:
    """Return the :class:`ExecutorKind` called ``name``.

    Raises
    ------
    InputError
        ``name`` is not ``local`` or ``dask``.
    """
    try:
        return ExecutorKind(name.strip().lower())
    except ValueError:
        raise InputError(f"unknown executor {name!r}; choose from "
                         f"{', '.join(k.value for k in ExecutorKind)} (e.g. --executor dask)"
                         ) from None


def map_in_order(fn: Callable[..., R], args: Sequence[tuple[Any, ...]], *,
                 executor: str | ExecutorKind = ExecutorKind.LOCAL, workers: int = 1,
                 scheduler_address: str | None = None) -> Iterator[R]:
    """Apply ``fn(*a)`` to every tuple of ``args`` and yield the results in the given order.

    Parameters
    ----------
    fn
        A module-level function (it is pickled to other processes).
    args
        One tuple of positional arguments per piece of work.
    executor
        ``local`` or ``dask`` (see the module docstring).
    workers
        Processes to start (``local``, and ``dask`` without a ``scheduler_address``). [-]
    scheduler_address
        Address of a running Dask scheduler (``dask`` only).

    Yields
    ------
    object
        ``fn(*args[i])`` for ``i = 0, 1, ...``.

    Raises
    ------
    InputError
        An unknown executor, ``workers < 1``, or a scheduler address given with ``local``.
    BackendUnavailableError
        The Dask scheduler at ``scheduler_address`` cannot be reached within
        :data:`DASK_CONNECT_TIMEOUT_S`.
    """
    kind = executor if isinstance(executor, ExecutorKind) else parse_executor(executor)
    if workers < 1:
        raise InputError(f"workers must be >= 1, got {workers}")
    if scheduler_address and kind is not ExecutorKind.DASK:
        raise InputError("--scheduler-address needs --executor dask")
    if kind is ExecutorKind.DASK:
        yield from _map_dask(fn, args, workers, scheduler_address)
    elif workers == 1 or len(args) <= 1:
        for a in args:
            yield fn(*a)
    else:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=min(workers, len(args))) as pool:
            yield from pool.map(fn, *zip(*args, strict=True))


def _map_dask(fn: Callable[..., R], args: Sequence[tuple[Any, ...]], workers: int,
              scheduler_address: str | None) -> Iterator[R]:
    require_extra("distributed", "--executor dask", "dask")
    import contextlib
    import tempfile

    import dask
    from distributed import Client, LocalCluster

    with contextlib.ExitStack() as stack:
        cluster = None
        if scheduler_address:
            try:
                client = Client(scheduler_address, timeout=DASK_CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError) as exc:
                raise BackendUnavailableError(
                    f"Dask scheduler {scheduler_address} did not answer within "
                    f"{DASK_CONNECT_TIMEOUT_S:.0f} s ({exc.__class__.__name__}); start it "
                    "(`dask scheduler`) or check the address") from exc
        else:
            # the scheduler's and workers' scratch (spill and lock files) go to this run's own
            # directory, removed after it: dask's default, <tmp>/dask-scratch-space, outlives it
            scratch = stack.enter_context(
                tempfile.TemporaryDirectory(prefix="carbonsched-dask-"))
            stack.enter_context(dask.config.set({"temporary-directory": scratch}))
            # the scheduler's HTTP server (dashboard, /metrics) on a free loopback port:
            # dashboard_address=None still took the fixed 8787 (distributed 2026.8), so a
            # second run on the machine printed "Port 8787 is already in use"
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   dashboard_address=DASK_HTTP_ADDRESS)
            client = Client(cluster)
        try:
            # pure=False: two identical argument tuples are still two pieces of work
            futures = [client.submit(fn, *a, pure=False) for a in args]
            for fut in futures:
                yield fut.result()
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
