"""What every pipeline example shares: its command line, and running its pipeline on the engine
the command line chose, saying where and how it ran.

Options: `--engine local|spark` (local by default; Spark on the active SparkContext, else a new
local[*] one, or `--master URL`), `--members N`, `--trades COUNT` where trades are processed,
and the example's own.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any

import trading

from jetspark.core import Job, JobCancelledError, JobConfig
from jetspark.core.cli import EngineSession, add_engine_arguments, chosen_engine
from jetspark.core.pipeline import Pipeline

POLL_SECONDS = 0.05
"""How often a streaming job's sink is looked at, to cancel the job once its results are in."""
TRADES = "trades"
"""The engine's list the streaming examples append the trades to, and follow as a journal."""


def parser(description: str, trades: int | None = 3_000) -> argparse.ArgumentParser:
    """An argument parser with the engine options (the local engine by default) and, unless
    `trades` is None, `--trades COUNT` (default `trades`)."""
    options = argparse.ArgumentParser(description=description)
    add_engine_arguments(options, default_engine="local")
    if trades is not None:
        options.add_argument(
            "--trades",
            type=int,
            default=trades,
            metavar="COUNT",
            help=f"how many trades to process (default {trades:,})",
        )
    return options


def open_session(args: argparse.Namespace, spark: Any = None) -> EngineSession:
    """The engine session `args` ask for (on `spark`, a SparkContext, if given). On Spark the
    engine ships trading.py to the executors: trades, objects of its class, cross between them
    as items, which are pickled by reference (functions and classes that only appear in the
    pipeline's code would be shipped by value without asking)."""
    session = EngineSession.of(args, spark)
    if chosen_engine(args, spark) == "spark":
        from jetspark.core.spark import SparkEngine

        engine = session.engine
        session.engine = SparkEngine(engine.context, engine.members, ship=[trading.__file__])
    return session


def run_to_list(
    args: argparse.Namespace,
    spark: Any,
    pipeline: Pipeline,
    sink_list: str,
    *,
    fills: dict[str, Any] | None = None,
    streaming: bool = False,
) -> list[Any]:
    """Runs `pipeline` on the engine `args` ask for and returns what it drained to the engine's
    list `sink_list`. `fills` first puts items into the engine's lists (name -> items) and maps
    (name -> dict). A batch job runs to its end; a `streaming` one until the list holds
    `args.trades` items, then it is cancelled."""
    with open_session(args, spark) as session:
        engine = session.engine
        for name, items in (fills or {}).items():
            if isinstance(items, dict):
                engine.get_map(name).update(items)
            else:
                engine.get_list(name).extend(items)
        done = (lambda: len(engine.get_list(sink_list)) >= args.trades) if streaming else None
        run(session, pipeline, done)
        return list(engine.get_list(sink_list))


def stream_trades(
    args: argparse.Namespace, spark: Any, pipeline: Pipeline, sink_list: str
) -> list[Any]:
    """Appends the first `args.trades` trades to the engine's list TRADES and runs `pipeline`,
    which follows that list, until `sink_list` holds a result per trade; returns the results."""
    fills = {TRADES: trading.trades(args.trades)}
    return run_to_list(args, spark, pipeline, sink_list, fills=fills, streaming=True)


def run(session: EngineSession, pipeline: Pipeline, done: Callable[[], bool] | None = None) -> None:
    """Runs `pipeline` on the session's engine: to its end, or (`done` given) until `done()`,
    then cancels it. Prints the engine and the mode the job ran in."""
    job = session.engine.new_job(pipeline, JobConfig(name=pipeline.name))
    if done is None:
        session.wait(job)
    else:
        _cancel_when(job, done)
    ended = "completed" if done is None else "cancelled once its results were in"
    print(f"{pipeline.name}: {session.ran(job)}, {ended}")


def _cancel_when(job: Job, done: Callable[[], bool]) -> None:
    """Waits until `done()` (or the job ends by itself: its error is raised), then cancels."""
    while not done():
        if job.status.is_terminal:
            job.join()
            break
        time.sleep(POLL_SECONDS)
    job.cancel()
    with contextlib.suppress(JobCancelledError):
        job.join()


def show(lines: Sequence[str], limit: int = 10) -> None:
    """Prints the first `limit` result lines, and how many more there are."""
    for line in lines[:limit]:
        print(f"  {line}")
    if len(lines) > limit:
        print(f"  ... {len(lines) - limit:,} more")
