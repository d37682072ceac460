"""The driver JVM's class archive: the classes a Spark driver loads, kept between runs as a
dynamic AppCDS archive so that the SparkContexts jetspark creates start in about half the time.

A context jetspark creates starts its driver JVM with `-XX:SharedArchiveFile` when a published
archive fits this Java, this Spark and this class path. Otherwise one process at a time records
one (`-XX:ArchiveClassesAtExit`): at that process's exit its JVM writes the archive, a throwaway
JVM maps and checksums it, and only then is it published under its final name by an atomic
rename. Before the first recording a throwaway `java -version` proves that this Java can record
at all: one built without a base CDS archive refuses to start with the option (`can_record`).

A JVM that maps a damaged archive (truncated by a full disk, say) dies with SIGBUS before any
Java code runs, so no driver is pointed at a file not proven whole: the published name records
the archive's size and SHA-256, and every driver checks both before it maps the file. A damaged
archive, or one another user could have written (a file or directory not owned by this user,
or writable by others), is never mapped: the driver starts without it and records a new one.

`JETSPARK_CLASS_ARCHIVE` chooses the directory (default `$XDG_CACHE_HOME/jetspark` or
`~/.cache/jetspark`); `off` turns the archive off. The directory keeps each environment's (each
key's) newest archive, drops those no driver mapped for `UNUSED_SECONDS` and keeps at most
`KEPT_ARCHIVES`, the most recently used (`prune`). A user's own SparkContext is never touched.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from pyspark import SparkConf

from jetspark.core.files import write_atomically

ENVIRONMENT_VARIABLE = "JETSPARK_CLASS_ARCHIVE"
DRIVER_OPTIONS = "spark.driver.extraJavaOptions"
QUIET = "-Xlog:cds*=off,class+path*=off"
"""Silences the JVM's CDS warnings (a mismatched archive is skipped, not announced on stdout)."""
WRITE_TIMEOUT = 60.0
"""Seconds to wait at exit for the JVM to write the archive (8-10 s on a 2-core machine)."""
CHECK_TIMEOUT = 60.0
"""Seconds the throwaway JVM that checks an archive may take."""
KEPT_ARCHIVES = 8
"""Published archives kept in the directory at most, one per key, the most recently used first
(`prune`; each is 60-170 MB)."""
UNUSED_SECONDS = 30 * 24 * 3600.0
"""An archive no driver mapped for this long is deleted at the next publication (`prune`)."""
STALE_LOCK_SECONDS = 3600.0
"""A recording lock older than this is taken over even if its process id is alive."""
_KEY_SETTINGS = (
    "spark.driver.extraClassPath",
    "spark.driver.memory",
    "spark.jars",
    "spark.jars.packages",
)
"""Settings that change the driver JVM's class path or heap layout, hence which archive fits."""
_OWN_OPTIONS = ("-XX:SharedArchiveFile", "-XX:ArchiveClassesAtExit", "-Xshare")


def archive_directory() -> Path | None:
    """Where archives are kept, per `JETSPARK_CLASS_ARCHIVE`; None when it says `off`."""
    chosen = os.environ.get(ENVIRONMENT_VARIABLE)
    if chosen is not None:
        return None if chosen.strip().lower() in ("off", "0", "false", "no", "") else Path(chosen)
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "jetspark"


def java_executable() -> Path | None:
    """The java that Spark's launch scripts run: `$JAVA_HOME/bin/java`, else `java` on PATH."""
    java_home = os.environ.get("JAVA_HOME")
    found = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_key(conf: SparkConf, java: Path, spark_home: Path) -> str:
    """A digest of everything that decides whether an archive fits a driver JVM: the JDK build
    (its module image), Spark's version and jars, the configuration directory, the settings that
    change the class path or the heap, and the user's own driver JVM options."""
    import pyspark

    java_home = java.parent.parent
    modules = java_home / "lib" / "modules"
    jars = spark_home / "jars"
    facts = [
        str(java),
        _stamp(modules),
        pyspark.__version__,
        str(spark_home.resolve()),
        _stamp(jars),
        os.environ.get("SPARK_CONF_DIR", ""),
        [conf.get(name) or "" for name in _KEY_SETTINGS],
        _user_options(conf.get(DRIVER_OPTIONS) or ""),
    ]
    return hashlib.sha256(json.dumps(facts).encode()).hexdigest()[:20]


def _stamp(path: Path) -> list[int]:
    """Size and modification time of `path`, or [] when it is missing."""
    try:
        status = path.stat()
    except OSError:
        return []
    return [status.st_size, status.st_mtime_ns]


def _user_options(options: str) -> str:
    """`options` without the ones this module adds."""
    return " ".join(
        option
        for option in options.split()
        if option != QUIET and not option.startswith(_OWN_OPTIONS)
    )


@dataclass(frozen=True)
class ArchivePaths:
    """The files of one archive key in the archive directory."""

    directory: Path
    key: str

    def published(self, size: int, digest: str) -> Path:
        """The published archive of `size` bytes and SHA-256 `digest` (its first 32 digits)."""
        return self.directory / f"driver-{self.key}.{size}.{digest[:_DIGEST_DIGITS]}.jsa"

    def archives(self) -> list[Path]:
        """This key's published archives, the most recently used first."""
        return _most_recent_first(self.directory.glob(f"driver-{self.key}.*.jsa"))

    @property
    def lock(self) -> Path:
        return self.directory / f"driver-{self.key}.lock"

    @property
    def unsupported(self) -> Path:
        """Marks a key whose Java cannot record an archive (`can_record`)."""
        return self.directory / f"driver-{self.key}.unsupported"

    def recording(self, pid: int) -> Path:
        return self.directory / f"driver-{self.key}.{pid}.recording"

    def probe(self, pid: int) -> Path:
        return self.directory / f"driver-{self.key}.{pid}.probe"

    def leftovers(self) -> list[Path]:
        """Recordings and probes of processes that died before finishing them."""
        return sorted(
            path
            for suffix in ("recording", "probe")
            for path in self.directory.glob(f"driver-{self.key}.*.{suffix}")
        )


_logger = logging.getLogger(__name__)
_DIGEST_DIGITS = 32
_PUBLISHED_NAME = re.compile(
    rf"driver-(?P<key>[0-9a-f]+)\.(?P<size>\d+)\.(?P<digest>[0-9a-f]{{{_DIGEST_DIGITS}}})\.jsa"
)
"""A published archive's name: its key, then the size and checksum recorded at publication."""


class Recording:
    """An archive the driver JVM writes at its exit; `finish_at_exit` publishes it once proven."""

    def __init__(self, paths: ArchivePaths) -> None:
        self.paths = paths
        self.owner = os.getpid()
        self.file = paths.recording(self.owner)

    def finish_at_exit(self, gateway: Any) -> None:
        """Registers the publication for this process's exit; reads the JVM's Java home and
        class path now, while it answers."""
        system = gateway.jvm.System
        java = Path(system.getProperty("java.home")) / "bin" / "java"
        class_path = system.getProperty("java.class.path")
        atexit.register(self.finish, gateway.proc, java, class_path)

    def finish(self, jvm: subprocess.Popen, java: Path, class_path: str) -> bool:
        """Ends the JVM (EOF on its stdin is PySpark's signal to exit), waits while it writes the
        archive (saying so when that takes more than a second), checks it with a throwaway JVM
        and publishes it; True when published. Releases the lock if it is still this process's.
        A forked child of the recorder does nothing."""
        if os.getpid() != self.owner:
            return False
        try:
            if jvm.stdin is not None:
                with contextlib.suppress(OSError):
                    jvm.stdin.close()
            try:
                exit_code = jvm.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                print(
                    "jetspark: saving the Spark driver's classes for faster starts "
                    f"(once for this Java and Spark) in {self.paths.directory} ...",
                    file=sys.stderr,
                    flush=True,
                )
                exit_code = jvm.wait(timeout=WRITE_TIMEOUT)
        except subprocess.TimeoutExpired:
            exit_code = None  # left to finish on its own; its file is unlinked below
        try:
            return exit_code == 0 and publish(self.file, self.paths, java, class_path) is not None
        except OSError:  # the directory went away or turned read-only: no archive this time
            return False
        finally:
            self.file.unlink(missing_ok=True)
            _release_lock(self.paths.lock, self.owner)


def describe() -> str:
    """What this process's driver JVM did with the class archive, in a sentence."""
    return _launch_state[-1] if _launch_state else "this process started no driver JVM"


def check_archive(archive: Path, java: Path, class_path: str) -> bool:
    """True when a throwaway JVM maps `archive` whole and its checksums hold (`-Xshare:on` makes
    any failure fatal); a truncated file crashes that JVM, never a driver."""
    command = [
        str(java),
        f"-XX:SharedArchiveFile={archive}",
        "-Xshare:on",
        "-XX:+VerifySharedSpaces",
        f"-XX:ErrorFile={os.devnull}",
        "-XX:-CreateCoredumpOnCrash",
        QUIET,
        "-cp",
        class_path,
        "-version",
    ]
    return _jvm_succeeds(command)


def _jvm_succeeds(command: list[str]) -> bool:
    """True when the throwaway JVM `command` exits 0 within CHECK_TIMEOUT seconds."""
    try:
        done = subprocess.run(command, capture_output=True, timeout=CHECK_TIMEOUT, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def publish(recorded: Path, paths: ArchivePaths, java: Path, class_path: str) -> Path | None:
    """Publishes `recorded` as `paths`' archive once `check_archive` proves it whole: an atomic
    rename to a name recording its size and SHA-256, then `prune`. Returns the published path,
    or None. A JVM already mapping an older archive keeps its own file."""
    if not recorded.is_file() or not check_archive(recorded, java, class_path):
        return None
    with recorded.open("rb") as file:
        size, digest = os.fstat(file.fileno()).st_size, _sha256(file)
    published = paths.published(size, digest)
    os.replace(recorded, published)
    prune(paths.directory, published)
    return published


def _sha256(file: BinaryIO) -> str:
    """The SHA-256 of what is left to read in `file`, in hex."""
    digest = hashlib.sha256()
    while chunk := file.read(1 << 20):
        digest.update(chunk)
    return digest.hexdigest()


def prune(directory: Path, newest: Path, now: float | None = None) -> None:
    """Deletes, in `directory`, the other archives of `newest`'s key (a key has one), archives
    whose name records no size and checksum (an older jetspark's), archives no driver mapped for
    UNUSED_SECONDS (a Spark or Java upgrade leaves the old one unused), and the least recently
    used beyond KEPT_ARCHIVES. A JVM mapping a deleted archive keeps it until it exits."""
    now = time.time() if now is None else now
    keys = {_key_of(newest)}
    for archive in _most_recent_first(directory.glob("driver-*.jsa")):
        if archive == newest:
            continue
        key = _key_of(archive)
        if (
            key is not None
            and key not in keys
            and now - _last_use(archive) <= UNUSED_SECONDS
            and len(keys) < KEPT_ARCHIVES
        ):
            keys.add(key)
        else:
            archive.unlink(missing_ok=True)


def _key_of(archive: Path) -> str | None:
    """The key of a published archive, None for a name that records no size and checksum."""
    name = _PUBLISHED_NAME.fullmatch(archive.name)
    return name["key"] if name else None


def _most_recent_first(archives: Iterable[Path]) -> list[Path]:
    """`archives` ordered by last use (modification time, which mapping one renews), newest
    first; one deleted meanwhile counts as oldest."""
    return sorted(archives, key=_last_use, reverse=True)


def _last_use(archive: Path) -> float:
    try:
        return archive.stat().st_mtime
    except OSError:
        return 0.0


def prepare(conf: SparkConf, spark_home: Path) -> Recording | None:
    """Adds the archive's options to the driver JVM options in `conf`: the published archive's
    when one is whole and this user's (`find_archive`), else options that record one if no other
    process is recording. Returns the Recording to finish once the JVM runs, else None. Leaves
    `conf` alone when the archive is off, the user chose CDS options, Java is not found, or the
    directory is not writable or not this user's alone (`_foreign`)."""
    directory = archive_directory()
    java = java_executable()
    options = conf.get(DRIVER_OPTIONS) or ""
    if directory is None:
        return _launched(f"the class archive is off ({ENVIRONMENT_VARIABLE}=off)")
    if java is None:
        return _launched("no class archive: java is not on PATH and JAVA_HOME is not set")
    if any(own in options for own in _OWN_OPTIONS):
        return _launched(f"no class archive: {DRIVER_OPTIONS} has CDS options of its own")
    paths = ArchivePaths(directory, archive_key(conf, java, spark_home))
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        refusal = _foreign(directory, "directory")
        if refusal is not None:
            return _launched(f"no class archive: {refusal}")
        archive = find_archive(paths)
        if archive is not None:
            conf.set(DRIVER_OPTIONS, f"{options} -XX:SharedArchiveFile={archive} {QUIET}")
            return _launched(f"the Spark driver started from its class archive {archive}")
        if paths.unsupported.is_file():
            return _launched(_CANNOT_RECORD)
        if not _take_lock(paths.lock):
            return _launched(f"no class archive yet: another process is saving it in {directory}")
    except OSError as error:
        return _launched(f"no class archive: cannot write in {directory} ({error.strerror})")
    for leftover in paths.leftovers():
        leftover.unlink(missing_ok=True)
    if not can_record(java, paths.probe(os.getpid()), conf.get("spark.driver.memory")):
        _release_lock(paths.lock, os.getpid())
        with contextlib.suppress(OSError):
            paths.unsupported.touch()
        return _launched(_CANNOT_RECORD)
    recording = Recording(paths)
    conf.set(DRIVER_OPTIONS, f"{options} -XX:ArchiveClassesAtExit={recording.file} {QUIET}")
    return _launched(f"the class archive is saved in {directory} as this process exits", recording)


def find_archive(paths: ArchivePaths) -> Path | None:
    """The newest of `paths`' published archives that is whole and this user's alone, its last
    use renewed; every other one of the key is deleted with a warning that says why (`_flaw`)."""
    for archive in paths.archives():
        flaw = _flaw(archive)
        if flaw is None:
            with contextlib.suppress(OSError):
                os.utime(archive)
            return archive
        _logger.warning("jetspark: not using the class archive %s: %s; deleted it", archive, flaw)
        archive.unlink(missing_ok=True)
    return None


def _flaw(archive: Path) -> str | None:
    """Why `archive` must not be mapped, or None: not a regular file of this user's that others
    cannot write, or a size or SHA-256 other than its name records (`ArchivePaths.published`)."""
    name = _PUBLISHED_NAME.fullmatch(archive.name)
    if name is None:
        return "its name records no size and checksum"
    try:
        descriptor = os.open(archive, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as error:
        return f"it cannot be opened ({error.strerror})"
    with os.fdopen(descriptor, "rb") as file:
        info = os.fstat(descriptor)
        foreign = _foreign_status(info, "file")
        if foreign is not None:
            return foreign
        if info.st_size != int(name["size"]):
            return f"it has {info.st_size} bytes, {name['size']} when it was published"
        if not _sha256(file).startswith(name["digest"]):
            return "its content is not the one published (SHA-256 differs)"
    return None


def _foreign(path: Path, what: str) -> str | None:
    """Why `path` (a directory or a file) may hold what another user wrote, or None."""
    return _foreign_status(path.stat(), what, path)


def _foreign_status(info: os.stat_result, what: str, path: Path | None = None) -> str | None:
    """Why a file or directory of status `info` may hold what another user wrote, or None: it
    belongs to another user, or users other than its owner may write it. Without POSIX
    ownership (Windows) nothing is foreign."""
    if not hasattr(os, "getuid"):
        return None
    named = f"{what} {path}" if path is not None else f"the {what}"
    if what == "file" and not stat.S_ISREG(info.st_mode):
        return f"{named} is not a regular file"
    if info.st_uid != os.getuid():
        return f"{named} belongs to another user (uid {info.st_uid}), not to uid {os.getuid()}"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (
            f"{named} is writable by other users (mode {stat.S_IMODE(info.st_mode):o}); "
            "restrict it (chmod go-w) or choose a directory of your own"
        )
    return None


_CANNOT_RECORD = "no class archive: this Java cannot record one (it has no base CDS archive)"


def can_record(java: Path, scratch: Path, driver_memory: str | None) -> bool:
    """True when `java` starts with `-XX:ArchiveClassesAtExit` at the driver's heap size. A JVM
    without a base CDS archive (a JDK built without one, or compressed oops off past a 32 GB heap
    without `classes_nocoops.jsa`) refuses to start at all with that option. `scratch` is the
    throwaway archive's path, deleted afterwards."""
    command = [str(java), *_heap_option(driver_memory)]
    command += [f"-XX:ArchiveClassesAtExit={scratch}", QUIET, "-version"]
    try:
        return _jvm_succeeds(command)
    finally:
        scratch.unlink(missing_ok=True)


def _heap_option(driver_memory: str | None) -> list[str]:
    """The `-Xmx` spark-submit gives the driver for `spark.driver.memory` (1g unless set; a bare
    number is MiB), or [] for a value it cannot read."""
    size = re.fullmatch(r"(\d+)\s*([kmgt]?)b?", (driver_memory or "1g").strip().lower())
    return [f"-Xmx{size[1]}{size[2] or 'm'}"] if size else []


_launch_state: list[str] = []
"""What `prepare` did, last entry for the latest driver JVM of this process (one per process)."""


def _launched(state: str, recording: Recording | None = None) -> Recording | None:
    """Notes `state` for `describe` and returns `recording`."""
    _launch_state.append(state)
    return recording


def _take_lock(lock: Path) -> bool:
    """Creates `lock` holding this process's id (`write_atomically`: never visible without it);
    takes over a lock whose process is gone or that is older than STALE_LOCK_SECONDS. False
    while another process holds it."""
    for _attempt in range(2):
        if write_atomically(str(lock), str(os.getpid()).encode(), 0o644, replace=False):
            return True
        if _lock_is_held(lock):
            return False
        lock.unlink(missing_ok=True)
    return False


def _release_lock(lock: Path, owner: int) -> None:
    """Deletes `lock` if it still holds `owner`'s process id; a lock another process took over
    (`_take_lock`, after STALE_LOCK_SECONDS) is theirs to delete."""
    if _lock_owner(lock) == owner:
        lock.unlink(missing_ok=True)


def _lock_owner(lock: Path) -> int | None:
    """The process id `lock` holds, None when it is missing or unreadable."""
    try:
        return int(lock.read_text())
    except (OSError, ValueError):
        return None


def _lock_is_held(lock: Path) -> bool:
    """True while the process named in `lock` lives and the lock is younger than the limit."""
    owner = _lock_owner(lock)
    try:
        age = time.time() - lock.stat().st_mtime
    except OSError:
        return False
    if owner is None or owner <= 0 or age > STALE_LOCK_SECONDS:
        return False
    try:
        os.kill(owner, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
