"""The `jetspark` command line (also `python -m jetspark.core`): the TF-IDF product commands.

This is the application layer on top of both the engines (`jetspark.core`) and the vertex
library (`jetspark.processors`). `jetspark.core` never imports `jetspark.processors` at module
level, so the TF-IDF package (and pyspark, for `--engine spark`) is imported lazily inside the
subcommands. Progress goes to stderr, results to stdout. Exit codes: 0 ok, 1 the job failed
(or writing failed midway), 2 bad usage or bad input (a missing or empty directory, an
unreadable stopwords or index file, an output path that cannot be written).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jetspark.core.errors import JobFailedError
from jetspark.core.job import Job

if TYPE_CHECKING:
    from jetspark.processors.tfidf import Corpus


def _positive_int(text: str) -> int:
    """An argparse type: an int of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _fraction(text: str) -> float:
    """An argparse type: a float between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 <= value <= 1:  # NaN fails this too
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def _master_url(text: str) -> str:
    """An argparse type: a Spark master URL (`session.check_master`)."""
    from jetspark.core.spark.session import check_master

    try:
        check_master(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from error
    return text


def _spark_setting(text: str) -> tuple[str, str]:
    """An argparse type: a Spark setting written KEY=VALUE, as spark-submit's `--conf` takes it."""
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def mode_of(job: Job) -> str:
    """How `job` ran: "local" on LocalEngine (its metrics say so), or on Spark "stages",
    "micro_batch" or "continuous" (its ExecutionMode)."""
    ran = job.metrics.execution_mode
    if ran == "local" or job.execution_mode is None:
        return ran
    return job.execution_mode.value


def chosen_engine(args: argparse.Namespace, spark: Any = None) -> str:
    """ "spark" or "local": `--engine` if given, else Spark under spark-submit or with a context
    handed in, else the program's default (`add_engine_arguments(default_engine=...)`)."""
    if getattr(args, "engine", None):
        return str(args.engine)
    if spark is not None:
        return "spark"
    from jetspark.core.spark.session import under_spark_submit

    return "spark" if under_spark_submit() else getattr(args, "default_engine", "spark")


def add_engine_arguments(
    parser: argparse.ArgumentParser,
    *,
    choose_engine: bool = True,
    default_engine: str = "spark",
    members: int | None = None,
    ui_default: str | None = None,
) -> None:
    """Adds `--engine spark|local` (unless not `choose_engine`; `default_engine` when it is not
    given, except that a program spark-submit runs, or one handed a SparkContext, uses Spark),
    `--master URL`, `--conf KEY=VALUE` (repeatable: Spark settings of the context the session
    creates), `--members N` (default `members`, else Spark's default parallelism and 1 on
    the local engine) and, when `ui_default` describes when the Spark UI is on by default,
    `--spark-ui`/`--no-spark-ui` (None when not given: see `EngineSession.of`)."""
    if choose_engine:
        under_submit = "" if default_engine == "spark" else "; spark under spark-submit"
        parser.add_argument(
            "--engine",
            choices=("spark", "local"),
            default=None,
            help=f"default {default_engine}{under_submit}",
        )
        parser.set_defaults(default_engine=default_engine)
    parser.add_argument(
        "--master",
        type=_master_url,
        metavar="URL",
        help="Spark master (default: spark-submit's --master under spark-submit, else local[*])",
    )
    parser.add_argument(
        "--conf",
        type=_spark_setting,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting of the context the command starts, as spark-submit's --conf "
        "(repeatable; wins over spark-submit's and jetspark's own)",
    )
    parser.add_argument(
        "--members",
        type=_positive_int,
        default=members,
        metavar="N",
        help=f"cluster members (default {members})"
        if members
        else "cluster members (default: Spark's default parallelism; 1 on the local engine)",
    )
    if ui_default is not None:
        parser.add_argument(
            "--spark-ui",
            action=argparse.BooleanOptionalAction,
            help=f"serve Spark's web UI on 127.0.0.1 while the job runs (default: {ui_default})",
        )


def _parser() -> argparse.ArgumentParser:
    """The argument parser of all subcommands."""
    from jetspark.processors.tfidf import (
        ASCII,
        DEFAULT_INDEX_PATH,
        DEFAULT_THRESHOLD,
        TOKENIZERS,
    )

    parser = argparse.ArgumentParser(
        prog="jetspark",
        description="Hazelcast Jet's Core API on Apache Spark: the TF-IDF inverted index job.",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show Spark's own log (JVM warnings, task failures) on stderr",
    )
    parser.add_argument("--version", action="version", version=version_line())
    parser.add_argument(
        "--submit-script",
        action=_PrintSubmitScript,
        help="print the path of the script spark-submit runs for these commands "
        '(spark-submit [options] "$(jetspark --submit-script)" COMMAND ...) and exit',
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    spark = argparse.ArgumentParser(add_help=False)
    add_engine_arguments(spark, choose_engine=False)
    engine = argparse.ArgumentParser(add_help=False)
    add_engine_arguments(engine, ui_default=f"on for a corpus of {LONG_CORPUS_MB} MB or more")
    engine.add_argument("--tokenizer", choices=TOKENIZERS, default=ASCII)
    corpus = argparse.ArgumentParser(add_help=False)
    corpus.add_argument(
        "docs_dir",
        nargs="?",
        metavar="DOCS_DIR",
        help="the documents (default: the Python standard library's *.py modules)",
    )
    corpus.add_argument(
        "--stopword-threshold",
        type=_fraction,
        default=DEFAULT_THRESHOLD,
        metavar="FRACTION",
        help="derived stopwords: words in more than FRACTION of the documents (default "
        f"{DEFAULT_THRESHOLD})",
    )
    tfidf = commands.add_parser(
        "tfidf", parents=[corpus, engine], help="build the inverted TF-IDF index of DOCS_DIR"
    )
    tfidf.add_argument("--stopwords", metavar="FILE", help="one stopword a line (default: derived)")
    tfidf.add_argument(
        "--index", metavar="OUT", default=DEFAULT_INDEX_PATH, help="default ./%(default)s"
    )
    tfidf.add_argument("--tsv", metavar="FILE", help="also write word<TAB>document<TAB>score")
    search = commands.add_parser("search", help="search a saved index")
    search.add_argument("query", metavar="QUERY")
    search.add_argument(
        "--index", metavar="FILE", default=DEFAULT_INDEX_PATH, help="default ./%(default)s"
    )
    search.add_argument("--top", type=_positive_int, default=10, metavar="N")
    commands.add_parser(
        "stopwords", parents=[corpus, engine], help="print the stopwords derived from DOCS_DIR"
    )
    explain = commands.add_parser(
        "explain", parents=[spark], help="print the Spark plan of a job's DAG"
    )
    explain.add_argument("job", choices=("tfidf",))
    commands.add_parser(
        "warm-up",
        parents=[spark],
        help="start Spark once and save the driver JVM's class archive (later starts are faster)",
    )
    _add_cluster_command(commands)
    commands.add_parser(
        "submit",
        add_help=False,
        usage="jetspark [--verbose] submit [spark-submit's options] APP.py [ARGS]",
        help="spark-submit without the JVM's start-up lines (spark-submit's arguments as they "
        "are; with --verbose, Spark's log)",
    ).add_argument("spark_submit_arguments", nargs=argparse.REMAINDER)
    snapshots = commands.add_parser(
        "snapshots",
        help="list the snapshots of a DirectorySnapshotStore, or show one snapshot's vertices",
    )
    snapshots.add_argument("store", metavar="DIR", help="the snapshot store's directory")
    snapshots.add_argument(
        "snapshot_id", nargs="?", type=int, metavar="ID", help="show this snapshot's vertices"
    )
    return parser


def version_line() -> str:
    """`jetspark --version`: jetspark's version, with pyspark's and Python's."""
    from importlib.metadata import version

    return (
        f"jetspark {version('jetspark')} (pyspark {version('pyspark')}, "
        f"Python {platform.python_version()})"
    )


SUBMIT_SCRIPT = Path(__file__).resolve().parent / "submit" / "jetspark_commands.py"
"""The script spark-submit runs for the `jetspark` commands (spark-submit needs a .py file)."""


class _PrintSubmitScript(argparse.Action):
    """`--submit-script`: prints SUBMIT_SCRIPT and exits, as `--version` prints the version."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        print(SUBMIT_SCRIPT)
        parser.exit()


def _port(text: str) -> int:
    """An argparse type: a TCP port number, 0 for any free one."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535, got {value}")
    return value


def _memory_size(text: str) -> str:
    """An argparse type: a memory size as Spark writes one (512m, 1g)."""
    if not re.fullmatch(r"[1-9]\d*[kmgtKMGT]", text):
        raise argparse.ArgumentTypeError(f"expected a size such as 512m or 2g, got {text!r}")
    return text


def _add_cluster_command(commands: Any) -> None:
    """`jetspark cluster [--workers N] [--cores N] [--memory SIZE] [--port P] [--webui-port P]
    [--work-dir DIR]`."""
    cluster = commands.add_parser(
        "cluster",
        help="start a Spark standalone cluster (Spark's own master and workers) on 127.0.0.1 "
        "to try jetspark on; Ctrl-C stops it",
    )
    cluster.add_argument("--workers", type=_positive_int, default=2, metavar="N", help="default 2")
    cluster.add_argument(
        "--cores", type=_positive_int, default=1, metavar="N", help="cores per worker (default 1)"
    )
    cluster.add_argument(
        "--memory", type=_memory_size, default="1g", metavar="SIZE", help="per worker (default 1g)"
    )
    cluster.add_argument(
        "--port", type=_port, default=7077, metavar="P", help="the master's (default 7077)"
    )
    cluster.add_argument(
        "--webui-port",
        type=_port,
        default=8080,
        metavar="P",
        help="the master's web UI (default 8080)",
    )
    cluster.add_argument(
        "--work-dir",
        metavar="DIR",
        help="keep the logs and the executors' output here (default: a temporary directory, "
        "removed at the end)",
    )


def _spark_start_error() -> type[BaseException]:
    """SparkStartError, imported only once an exception is being handled (it comes with Spark)."""
    from jetspark.core.spark.driver_jvm import SparkStartError

    return SparkStartError


def main(argv: Sequence[str] | None = None, *, spark: Any = None) -> int:
    """Runs one command; returns the exit code. `spark`: an existing SparkContext or
    SparkSession for `--engine spark` (tests share one), instead of creating a context.
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    verbose = arguments[:1] == ["--verbose"]
    if arguments[verbose : verbose + 1] == ["submit"]:  # spark-submit's arguments, unparsed
        from jetspark.core.spark.spark_submit import run_spark_submit

        return run_spark_submit(arguments[verbose + 1 :], verbose=verbose)
    parser = _parser()
    try:
        args = parser.parse_args(arguments)
        if getattr(args, "engine", None) == "local":
            for option, value in (("--master", args.master), ("--conf", args.conf)):
                if value:
                    parser.error(f"{option} applies to --engine spark only")
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 2
    from jetspark.processors.tfidf import InputError

    command: Callable[[argparse.Namespace, Any], int] = {
        "tfidf": _tfidf,
        "search": _search,
        "stopwords": _stopwords,
        "explain": _explain,
        "warm-up": _warm_up,
        "cluster": _cluster,
        "snapshots": _snapshots,
    }[args.command]
    try:
        return command(args, spark)
    except KeyboardInterrupt:  # Ctrl-C: the command's Spark context is stopped by now
        print(f"jetspark {args.command}: interrupted", file=sys.stderr)
        return 130
    except InputError as error:
        print(f"jetspark {args.command}: error: {error}", file=sys.stderr)
        return 2
    except JobFailedError as error:
        print(f"jetspark {args.command}: the job failed: {error}", file=sys.stderr)
        return 1
    except _spark_start_error() as error:
        print(f"jetspark {args.command}: error: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        print(f"jetspark {args.command}: error: {error}", file=sys.stderr)
        return 1


def _say(message: str) -> None:
    """A progress line on stderr."""
    print(message, file=sys.stderr, flush=True)


LONG_CORPUS_MB = 100
"""The corpus size from which `jetspark tfidf` and `stopwords` turn the Spark UI on by default
(the index job then takes minutes; the UI lengthens Spark's start-up)."""


class EngineSession:
    """The engine a command or example runs on: LocalEngine, or SparkEngine on `spark` (a
    SparkContext or SparkSession), else on the process's active context, else on a new context
    for `master` (default: spark-submit's under spark-submit, else local[*]), which `close()`
    (or leaving the `with` block) stops again. A context it creates is quiet
    (`session.create_context`) unless `verbose`, serves Spark's web UI on 127.0.0.1 when
    `ui` (its address is announced on stderr) and has the Spark `settings` (`--conf`), which
    neither the local engine nor a context it does not create can take: ValueError then.
    """

    def __init__(
        self,
        kind: str = "spark",
        members: int | None = None,
        master: str | None = None,
        spark: Any = None,
        verbose: bool = False,
        ui: bool = False,
        settings: Mapping[str, str] | None = None,
    ) -> None:
        self._created: Any = None
        if kind == "local":
            if settings:
                raise ValueError(f"Spark settings ({', '.join(settings)}) need the Spark engine")
            from jetspark.core.local_engine import LocalEngine

            count = members or 1
            self.description = f"the local engine ({count} member{'s' * (count > 1)})"
            self.engine: Any = LocalEngine(members=count)
            return
        from jetspark.core.spark import SparkEngine

        if spark is None:
            spark = _active_spark_context()
        if spark is None:
            from jetspark.core.spark.session import create_context, default_master

            _say(f"starting Spark ({master or default_master()}) ...")
            spark = self._created = create_context(
                master, verbose=verbose, ui=ui, settings=settings
            )
        elif settings:
            raise ValueError(
                f"Spark settings ({', '.join(settings)}) apply to a context the session "
                "creates, and a SparkContext is running already"
            )
        self.engine = SparkEngine(spark=spark, members=members)
        self.description = f"Spark {self.engine.context.master} ({self.engine.members} members)"
        if ui:
            from jetspark.core.spark.session import ui_address

            address = ui_address(self.engine.context)
            if address is not None:
                _say(f"Spark UI: {address}")

    @classmethod
    def of(cls, args: argparse.Namespace, spark: Any = None, *, ui: bool = False) -> EngineSession:
        """The session the parsed `add_engine_arguments` options ask for; `ui`: whether the Spark
        UI is on when `--spark-ui`/`--no-spark-ui` was not given."""
        engine = chosen_engine(args, spark)
        verbose = getattr(args, "verbose", False)
        chosen = getattr(args, "spark_ui", None)
        ui = ui if chosen is None else chosen
        return cls(engine, args.members, args.master, spark, verbose, ui, dict(args.conf))

    def ran(self, job: Job) -> str:
        """Where and how `job` ran: "ran on <engine>, mode <local|stages|micro_batch|
        continuous>", the line every example prints."""
        return f"ran on {self.description}, mode {mode_of(job)}"

    def wait(self, job: Job) -> None:
        """Waits for `job`; on Spark it shows the progress of the job's stages meanwhile (a bar
        per stage on a terminal, else a line per finished stage)."""
        context = getattr(self.engine, "context", None)
        group = getattr(job, "group", None)
        if context is None or group is None:
            job.join()
            return
        from jetspark.core.spark.progress import wait_with_progress

        wait_with_progress(job, context, group)

    def close(self) -> None:
        """Stops the SparkContext this session created, if any, and ends its driver JVM."""
        if self._created is not None:
            from jetspark.core.spark.session import stop_context

            stop_context(self._created, end_jvm=True)
            self._created = None

    def close_during(self, work: Callable[[], None]) -> None:
        """Runs `work` (driver-only work that needs no engine) while the session closes in
        another thread: stopping a SparkContext takes about a second, nearly all of it waiting
        for the JVM."""
        closing = threading.Thread(target=self.close, name="stop-spark")
        closing.start()
        try:
            work()
        finally:
            closing.join()

    def __enter__(self) -> EngineSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _active_spark_context() -> Any:
    """The SparkContext already running in this process (not ours to stop), or None."""
    from pyspark import SparkContext

    return SparkContext._active_spark_context


def _corpus(args: argparse.Namespace) -> Corpus:
    """The documents of DOCS_DIR, or the default corpus; announces what will be read."""
    from jetspark.processors.tfidf import default_corpus, scan_corpus

    corpus = default_corpus() if args.docs_dir is None else scan_corpus(args.docs_dir)
    empty = f", {corpus.empty:,} empty" if corpus.empty else ""
    _say(
        f"reading {len(corpus.documents):,} documents ({corpus.size / 1e6:.1f} MB{empty}) "
        f"from {corpus.root}"
    )
    return corpus


def _long_running(corpus: Corpus) -> bool:
    """Whether a job over `corpus` runs long enough to want the Spark UI by default."""
    return corpus.size >= LONG_CORPUS_MB * 1_000_000


def _derived_stopwords(
    session: EngineSession, corpus: Corpus, args: argparse.Namespace
) -> frozenset[str]:
    """The stopwords of `corpus` by the derivation job, announced as it starts."""
    from jetspark.processors.tfidf import derive_stopwords

    _say(
        f"deriving stopwords on {session.description}: words in more than "
        f"{args.stopword_threshold:.0%} of the documents ..."
    )
    return derive_stopwords(
        session.engine, corpus, args.stopword_threshold, args.tokenizer, session.wait
    )


def _tfidf(args: argparse.Namespace, spark: Any) -> int:
    """`jetspark tfidf`: builds the index, saves it (and the TSV), prints a summary."""
    from jetspark.processors.tfidf import describe_skipped, load_stopwords, write_index
    from jetspark.processors.tfidf.index import check_writable

    started = time.monotonic()
    index_path = os.path.abspath(args.index)
    for path in (index_path, args.tsv):
        if path:
            check_writable(path)
            _probe_writable(path)
    if args.stopwords:
        _check_text_file(args.stopwords, "stopwords file")
    stopwords = load_stopwords(args.stopwords) if args.stopwords else None
    corpus = _corpus(args)
    with EngineSession.of(args, spark, ui=_long_running(corpus)) as session:
        if stopwords is None:
            derived = f"words in more than {args.stopword_threshold:.0%} of the documents"
            _say(f"deriving the stopwords in the index job: {derived}")
        else:
            _say(f"using {len(stopwords):,} stopwords from {args.stopwords}")
        _check_docs_shared(session.engine, corpus)
        _check_index_shared(session.engine, index_path, args.index)
        _say(f"building the index on {session.description} into {index_path} ...")
        job_started = time.monotonic()
        index = write_index(
            session.engine,
            corpus,
            index_path,
            stopwords,
            args.tokenizer,
            session.wait,
            args.stopword_threshold,
        )
        job_seconds = time.monotonic() - job_started
        if args.tsv:
            session.close_during(lambda: index.write_tsv(args.tsv))
    print(f"documents:      {len(corpus.documents):,} ({corpus.empty:,} empty)")
    print(f"distinct words: {index.word_count:,} ({len(index.stopwords):,} stopwords left out)")
    print(f"postings:       {index.posting_count:,}")
    print(f"elapsed:        {time.monotonic() - started:.1f} s (index job {job_seconds:.1f} s)")
    print(f"index:          {index_path}")
    if args.tsv:
        print(f"tsv:            {args.tsv}")
    if corpus.skipped:
        print(describe_skipped(corpus.skipped))
    return 0


def _warm_up(args: argparse.Namespace, spark: Any) -> int:
    """`jetspark warm-up`: starts Spark and runs a two-task job, so that this process saves the
    driver JVM's class archive at its exit unless it exists (`core/spark/class_archive.py`)."""
    from jetspark.core.spark import class_archive

    with EngineSession(
        "spark", args.members, args.master, spark, args.verbose, settings=dict(args.conf)
    ) as session:
        session.engine.context.parallelize(range(2), 2).map(abs).collect()
    print(class_archive.describe())
    return 0


def _cluster(args: argparse.Namespace, spark: Any) -> int:
    """`jetspark cluster`: starts a standalone cluster on 127.0.0.1, says how to use it, and
    keeps it up until Ctrl-C or SIGTERM (exit 0) or until one of its daemons exits (exit 1)."""
    from jetspark.core.spark.standalone import ClusterError, StandaloneCluster

    stopping = threading.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: stopping.set())
    cluster = StandaloneCluster(
        workers=args.workers,
        cores=args.cores,
        memory=args.memory,
        port=args.port,
        web_ui_port=args.webui_port,
        work_dir=args.work_dir,
    )
    with cluster:
        _say(f"starting a Spark master and {_plural(args.workers, 'worker')} on 127.0.0.1 ...")
        try:
            cluster.start()
        except ClusterError as error:
            _say(f"jetspark cluster: error: {error}")
            return 1
        print(f"master:     {cluster.master_url}")
        print(f"web UI:     {cluster.web_ui_url}")
        print(f"workers:    {args.workers} x {args.cores} core(s), {args.memory}")
        print(f"work dir:   {cluster.work_dir}")
        print(f"submit:     spark-submit --master {cluster.master_url} APP.py")
        print("Ctrl-C stops the cluster", flush=True)
        while not stopping.wait(0.5):
            exited = cluster.exited()
            if exited:
                _say(f"{', '.join(exited)} exited:\n{cluster.log_tail(exited[0])}")
                return 1
        _say("stopping the cluster ...")
    return 0


def _plural(count: int, noun: str) -> str:
    return f"{count:,} {noun}{'s' * (count != 1)}"


def _search(args: argparse.Namespace, spark: Any) -> int:
    """`jetspark search`: the documents containing every query term, best first."""
    from jetspark.processors.tfidf import InputError, open_index, search
    from jetspark.processors.tfidf.search import query_terms
    from jetspark.processors.tfidf.tokenize import Tokenizer

    try:
        index = open_index(args.index)
        words = Tokenizer(index.tokenizer, frozenset()).words(args.query)
        terms = query_terms(index, args.query)
        hits = search(index, args.query, args.top) if terms else []
    except InputError:
        raise
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as error:
        raise InputError(
            f"{args.index!r} is a damaged jetspark index ({type(error).__name__}: {error}); "
            "rebuild it with `jetspark tfidf`"
        ) from error
    if not words:
        raise InputError(f"the query {args.query!r} has no words to search for")
    damaged = next((hit for hit in hits if not math.isfinite(hit.score)), None)
    if damaged is not None:
        raise InputError(
            f"{args.index!r} is a damaged jetspark index: {damaged.document!r} scores "
            f"{damaged.score}; rebuild it with `jetspark tfidf`"
        )
    if not terms:
        print(f"no search terms in {args.query!r}: all its words are stopwords")
        return 0
    if not hits:
        print(f"no document contains all of: {' '.join(terms)}")
    for hit in hits:
        print(f"{hit.score:12.4f}  {hit.document}")
    return 0


def _probe_writable(path: str) -> None:
    """InputError unless a file can really be created beside `path` (a directory that claims
    to be writable, such as /proc, fails only here), before the long job runs."""
    from jetspark.core.files import create_exclusive
    from jetspark.processors.tfidf import InputError

    directory = os.path.dirname(os.path.abspath(path))
    try:
        probe, file = create_exclusive(directory, ".jetspark-probe")
        file.close()
        os.remove(probe)
    except OSError as error:
        raise InputError(f"cannot write {path!r}: {error.strerror or error}") from error


def _cluster_master(engine: Any) -> str | None:
    """The master of the engine's Spark cluster, or None on LocalEngine and `local[...]`."""
    context = getattr(engine, "context", None)
    if context is None:
        return None
    from jetspark.core.spark.session import master_of

    master = master_of(context)
    return None if master.startswith("local") else master


def _check_docs_shared(engine: Any, corpus: Corpus) -> None:
    """InputError when some executors of a Spark cluster do not see the documents (the tasks
    read them), before the job runs: the directory, its first and its last document."""
    from jetspark.processors.tfidf import InputError

    master = _cluster_master(engine)
    if master is None:
        return
    from jetspark.core.spark.shared_storage import hosts_missing

    root = str(corpus.root)
    samples = {corpus.documents[0], corpus.documents[-1]}
    missing = hosts_missing(engine.context, [root, *(os.path.join(root, n) for n in samples)])
    if missing:
        raise InputError(
            "DOCS_DIR must be a directory every executor reaches at the same path (shared "
            f"storage): on the cluster {master} the executors read the documents, and those on "
            f"{', '.join(missing)} do not see {root} and its documents. Put the documents on "
            "shared storage, or run with --master local[*]"
        )


def _check_index_shared(engine: Any, index_path: str, given: str) -> None:
    """InputError when some executors of a Spark cluster do not see the directory where the
    partitioned index goes (its parts are written by the tasks), before the job runs."""
    from jetspark.processors.tfidf import DEFAULT_INDEX_PATH, InputError
    from jetspark.processors.tfidf.parts import is_single_file

    master = _cluster_master(engine)
    if master is None or is_single_file(index_path):
        return
    from jetspark.core.spark.shared_storage import hosts_not_seeing

    parent = os.path.dirname(index_path)
    missing = hosts_not_seeing(engine.context, parent)
    if missing:
        default = (
            f" (the default, ./{DEFAULT_INDEX_PATH}, is in the directory the command runs in, "
            "on this machine)"
            if given == DEFAULT_INDEX_PATH
            else ""
        )
        raise InputError(
            "--index must be a directory every executor reaches at the same path (shared "
            f"storage): on the cluster {master} the executors write the index's parts, and "
            f"those on {', '.join(missing)} do not see {parent}, where {index_path} goes"
            f"{default}. Give --index a directory on shared storage, or an OUT ending in "
            ".msgpack (one file, written by the driver: small corpora)"
        )


def _check_text_file(path: str, what: str) -> None:
    """InputError when the file at `path` is binary (holds NUL bytes) or not UTF-8 text."""
    from jetspark.processors.tfidf import InputError

    try:
        with open(path, "rb") as file:
            data = file.read(1 << 20)
    except OSError:
        return  # the loader reports an unreadable file in its own words
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        if len(data) < 1 << 20 or error.start < len(data) - 3:  # not a cut multi-byte character
            raise InputError(
                f"the {what} {path!r} is not UTF-8 text ({error.reason} at byte {error.start})"
            ) from error
        text = ""
    if "\0" in text or b"\0" in data:
        raise InputError(f"the {what} {path!r} is a binary file, not text (one entry a line)")


def _stopwords(args: argparse.Namespace, spark: Any) -> int:
    """`jetspark stopwords`: prints the derived stopwords, one a line (a `--stopwords` file)."""
    corpus = _corpus(args)
    with EngineSession.of(args, spark, ui=_long_running(corpus)) as session:
        _check_docs_shared(session.engine, corpus)
        stopwords = _derived_stopwords(session, corpus, args)
    for word in sorted(stopwords):
        print(word)
    return 0


def _explain(args: argparse.Namespace, spark: Any) -> int:
    """`jetspark explain tfidf`: the Spark plan of the TF-IDF DAG."""
    from jetspark.processors.tfidf import build_dag, default_corpus_dir

    with EngineSession.of(args, spark) as session:
        dag = build_dag(str(default_corpus_dir()))
        print(session.engine.explain(dag))  # type: ignore[attr-defined]
    return 0


def _snapshots(args: argparse.Namespace, spark: Any) -> int:
    """`jetspark snapshots DIR [ID]`: the store's snapshots, or one snapshot's vertices; reads
    the store without changing it (no Spark, no JVM)."""
    from jetspark.core.errors import SnapshotError
    from jetspark.core.snapshot_inventory import show_snapshot, show_store
    from jetspark.processors.tfidf import InputError

    try:
        print(
            show_store(args.store)
            if args.snapshot_id is None
            else show_snapshot(args.store, args.snapshot_id)
        )
    except SnapshotError as error:
        raise InputError(str(error)) from error
    return 0
