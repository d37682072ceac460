"""The driver JVM's class archive: which options a context gets, one recorder at a time, and
publication only of archives a throwaway JVM proved whole. The JVMs here are bare `java`
processes (`-version`), so these tests need Java but no Spark."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyspark import SparkConf

from jetspark.core.spark import class_archive
from jetspark.core.spark.class_archive import (
    DRIVER_OPTIONS,
    QUIET,
    ArchivePaths,
    Recording,
    archive_key,
    find_archive,
    java_executable,
    prepare,
    prune,
    publish,
)

JAVA = java_executable()
needs_java = pytest.mark.skipif(JAVA is None, reason="needs java on PATH or JAVA_HOME")


@pytest.fixture
def archive_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "archives"
    monkeypatch.setenv(class_archive.ENVIRONMENT_VARIABLE, str(directory))
    return directory


@pytest.fixture
def spark_home(tmp_path: Path) -> Path:
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    return home


def conf_with(options: str = "-Dlog4j2.configurationFile=x", **settings: str) -> SparkConf:
    conf = SparkConf(loadDefaults=False).set(DRIVER_OPTIONS, options)
    for name, value in settings.items():
        conf.set(name, value)
    return conf


def paths_for(conf: SparkConf, directory: Path, spark_home: Path) -> ArchivePaths:
    assert JAVA is not None
    return ArchivePaths(directory, archive_key(conf, JAVA, spark_home))


def published_as(paths: ArchivePaths, content: bytes) -> Path:
    """Places `content` where `publish` would put an archive of it, size and SHA-256 in the name."""
    paths.directory.mkdir(parents=True, exist_ok=True)
    archive = paths.published(len(content), hashlib.sha256(content).hexdigest())
    archive.write_bytes(content)
    archive.chmod(0o444)
    return archive


def record_archive(target: Path, class_path: str) -> None:
    """A real (small) dynamic archive, written by a JVM at its exit."""
    subprocess.run(
        [str(JAVA), f"-XX:ArchiveClassesAtExit={target}", QUIET, "-cp", class_path, "-version"],
        check=True,
        capture_output=True,
    )
    assert target.stat().st_size > 0


@needs_java
def test_a_published_archive_is_mapped_by_the_next_driver(archive_dir, spark_home):
    paths = paths_for(conf_with(), archive_dir, spark_home)
    archive = published_as(paths, b"archive")
    conf = conf_with()

    assert prepare(conf, spark_home) is None
    assert conf.get(DRIVER_OPTIONS) == (
        f"-Dlog4j2.configurationFile=x -XX:SharedArchiveFile={archive} {QUIET}"
    )
    assert class_archive.describe() == f"the Spark driver started from its class archive {archive}"


def damage(archive: Path, how: str) -> None:
    """Truncates `archive` to half its size, or alters one byte of it."""
    content = bytearray(archive.read_bytes())
    archive.chmod(0o644)
    if how == "truncated":
        del content[len(content) // 2 :]
    else:
        content[len(content) // 2] ^= 0xFF
    archive.write_bytes(bytes(content))


@needs_java
@pytest.mark.parametrize("how", ["truncated", "altered"])
def test_a_damaged_archive_is_never_mapped_but_recorded_again(archive_dir, spark_home, how, caplog):
    paths = paths_for(conf_with(), archive_dir, spark_home)
    archive = published_as(paths, b"a whole archive")
    damage(archive, how)
    conf = conf_with()

    recording = prepare(conf, spark_home)

    assert recording is not None
    assert "SharedArchiveFile" not in conf.get(DRIVER_OPTIONS)
    assert f"-XX:ArchiveClassesAtExit={recording.file}" in conf.get(DRIVER_OPTIONS)
    assert not archive.exists()
    problem = "7 bytes, 15 when it was published" if how == "truncated" else "SHA-256 differs"
    assert f"not using the class archive {archive}: " in caplog.text
    assert problem in caplog.text


@needs_java
def test_of_two_archives_of_a_key_the_newest_whole_one_is_mapped(archive_dir, spark_home):
    paths = paths_for(conf_with(), archive_dir, spark_home)
    older = published_as(paths, b"older")
    os.utime(older, (1000, 1000))
    newer = published_as(paths, b"newer, damaged later")
    damage(newer, "truncated")
    conf = conf_with()

    assert prepare(conf, spark_home) is None
    assert f"-XX:SharedArchiveFile={older} " in conf.get(DRIVER_OPTIONS)
    assert older.stat().st_mtime > 1000  # its last use, which pruning goes by
    assert find_archive(paths) == older and not newer.exists()


@needs_java
def test_an_archive_others_can_write_is_never_mapped(archive_dir, spark_home, caplog):
    paths = paths_for(conf_with(), archive_dir, spark_home)
    archive = published_as(paths, b"archive")
    archive.chmod(0o666)
    conf = conf_with()

    assert isinstance(prepare(conf, spark_home), Recording)
    assert "SharedArchiveFile" not in conf.get(DRIVER_OPTIONS)
    assert "the file is writable by other users (mode 666)" in caplog.text


@needs_java
@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() != 0, reason="chown needs root")
def test_an_archive_of_another_user_is_never_mapped(archive_dir, spark_home, caplog):
    paths = paths_for(conf_with(), archive_dir, spark_home)
    archive = published_as(paths, b"archive")
    os.chown(archive, 4242, 4242)
    conf = conf_with()

    assert isinstance(prepare(conf, spark_home), Recording)
    assert "SharedArchiveFile" not in conf.get(DRIVER_OPTIONS)
    assert "the file belongs to another user (uid 4242)" in caplog.text


@needs_java
def test_a_directory_others_can_write_is_not_used(archive_dir, spark_home):
    paths = paths_for(conf_with(), archive_dir, spark_home)
    archive = published_as(paths, b"archive")
    archive_dir.chmod(0o1777)  # a shared temporary directory
    conf = conf_with()

    assert prepare(conf, spark_home) is None
    assert conf.get(DRIVER_OPTIONS) == "-Dlog4j2.configurationFile=x"
    assert class_archive.describe() == (
        f"no class archive: directory {archive_dir} is writable by other users (mode 1777); "
        "restrict it (chmod go-w) or choose a directory of your own"
    )
    assert sorted(archive_dir.iterdir()) == [archive]  # no lock, no recording there


@needs_java
def test_a_directory_of_another_user_is_not_used(archive_dir, spark_home, monkeypatch):
    archive_dir.mkdir(mode=0o700)
    real_uid = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: real_uid + 1)
    conf = conf_with()

    assert prepare(conf, spark_home) is None
    assert conf.get(DRIVER_OPTIONS) == "-Dlog4j2.configurationFile=x"
    assert class_archive.describe().startswith(
        f"no class archive: directory {archive_dir} belongs to another user (uid {real_uid})"
    )


@needs_java
def test_a_new_directory_is_private(archive_dir, spark_home):
    prepare(conf_with(), spark_home)

    assert archive_dir.stat().st_mode & 0o777 == 0o700


@needs_java
def test_without_an_archive_one_process_records_and_the_others_run_without(archive_dir, spark_home):
    first = conf_with()
    recording = prepare(first, spark_home)

    assert recording is not None
    assert f"-XX:ArchiveClassesAtExit={recording.file}" in first.get(DRIVER_OPTIONS)
    assert recording.paths.lock.read_text() == str(os.getpid())
    assert class_archive.describe() == (
        f"the class archive is saved in {archive_dir} as this process exits"
    )
    second = conf_with()
    assert prepare(second, spark_home) is None
    assert second.get(DRIVER_OPTIONS) == "-Dlog4j2.configurationFile=x"
    assert class_archive.describe() == (
        f"no class archive yet: another process is saving it in {archive_dir}"
    )


@needs_java
def test_the_lock_of_a_process_that_died_is_taken_over(archive_dir, spark_home):
    gone = subprocess.Popen(["true"])
    gone.wait()
    paths = paths_for(conf_with(), archive_dir, spark_home)
    archive_dir.mkdir()
    paths.lock.write_text(str(gone.pid))
    leftovers = [paths.recording(gone.pid), paths.probe(gone.pid)]
    for leftover in leftovers:
        leftover.write_bytes(b"half an archive")

    recording = prepare(conf_with(), spark_home)

    assert recording is not None
    assert paths.lock.read_text() == str(os.getpid())
    assert not any(leftover.exists() for leftover in leftovers)


def test_a_java_that_cannot_record_is_asked_once_and_gets_no_archive(
    archive_dir, spark_home, tmp_path, monkeypatch
):
    calls = tmp_path / "calls"
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    # what a JVM without a base CDS archive does with -XX:ArchiveClassesAtExit
    java.write_text(f'#!/bin/sh\necho "$@" >> "{calls}"\nexit 1\n')
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(java.parent.parent))
    conf = conf_with(**{"spark.driver.memory": "2g"})

    assert prepare(conf, spark_home) is None
    assert class_archive.describe() == class_archive._CANNOT_RECORD
    assert conf.get(DRIVER_OPTIONS) == "-Dlog4j2.configurationFile=x"
    assert calls.read_text().startswith("-Xmx2g -XX:ArchiveClassesAtExit=")
    assert [path.suffix for path in archive_dir.iterdir()] == [".unsupported"]

    assert prepare(conf_with(**{"spark.driver.memory": "2g"}), spark_home) is None
    assert len(calls.read_text().splitlines()) == 1


@pytest.mark.parametrize(
    ("memory", "option"),
    [(None, ["-Xmx1g"]), ("2G", ["-Xmx2g"]), ("4gb", ["-Xmx4g"]), ("1024", ["-Xmx1024m"])],
)
def test_the_probe_runs_at_the_heap_spark_submit_gives_the_driver(memory, option):
    assert class_archive._heap_option(memory) == option
    assert class_archive._heap_option("a lot") == []


@needs_java
@pytest.mark.parametrize(
    "options", ["-Xshare:off", "-XX:SharedArchiveFile=/mine.jsa", "-XX:ArchiveClassesAtExit=x"]
)
def test_the_users_own_cds_options_are_left_alone(archive_dir, spark_home, options):
    conf = conf_with(options)

    assert prepare(conf, spark_home) is None
    assert conf.get(DRIVER_OPTIONS) == options
    assert not archive_dir.exists()


@needs_java
@pytest.mark.parametrize("value", ["off", "0", ""])
def test_the_environment_turns_the_archive_off(monkeypatch, spark_home, value):
    monkeypatch.setenv(class_archive.ENVIRONMENT_VARIABLE, value)
    conf = conf_with()

    assert prepare(conf, spark_home) is None
    assert conf.get(DRIVER_OPTIONS) == "-Dlog4j2.configurationFile=x"
    assert class_archive.describe() == "the class archive is off (JETSPARK_CLASS_ARCHIVE=off)"


def test_the_default_directory_is_the_users_cache(monkeypatch, tmp_path):
    monkeypatch.delenv(class_archive.ENVIRONMENT_VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    assert class_archive.archive_directory() == tmp_path / "jetspark"


@needs_java
def test_an_unwritable_directory_means_no_archive(monkeypatch, tmp_path, spark_home):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(class_archive.ENVIRONMENT_VARIABLE, str(blocker / "archives"))
    conf = conf_with()

    assert prepare(conf, spark_home) is None
    assert conf.get(DRIVER_OPTIONS) == "-Dlog4j2.configurationFile=x"


@needs_java
def test_the_key_follows_the_class_path_and_heap_but_not_its_own_options(spark_home):
    assert JAVA is not None
    plain = archive_key(conf_with(), JAVA, spark_home)

    assert archive_key(conf_with(), JAVA, spark_home) == plain
    assert archive_key(conf_with(f"-Dlog4j2.configurationFile=x {QUIET}"), JAVA, spark_home) == (
        plain
    )
    other_jars = conf_with(**{"spark.driver.extraClassPath": "/opt/extra.jar"})
    assert archive_key(other_jars, JAVA, spark_home) != plain
    assert archive_key(conf_with(**{"spark.driver.memory": "40g"}), JAVA, spark_home) != plain
    assert archive_key(conf_with("-XX:+UseSerialGC"), JAVA, spark_home) != plain
    (spark_home / "jars" / "new.jar").write_bytes(b"")
    os.utime(spark_home / "jars", ns=(1, 1))
    assert archive_key(conf_with(), JAVA, spark_home) != plain


@needs_java
def test_only_a_whole_archive_is_published_under_its_size_and_checksum(tmp_path):
    class_path = str(tmp_path)
    paths = ArchivePaths(tmp_path, "ab")
    recorded = tmp_path / "recorded.jsa"
    record_archive(recorded, class_path)
    content = recorded.read_bytes()
    truncated = tmp_path / "truncated.jsa"
    truncated.write_bytes(content[: len(content) // 2])
    assert JAVA is not None

    assert publish(truncated, paths, JAVA, class_path) is None
    assert paths.archives() == []
    assert publish(tmp_path / "missing.jsa", paths, JAVA, class_path) is None
    published = publish(recorded, paths, JAVA, class_path)

    assert published == paths.published(len(content), hashlib.sha256(content).hexdigest())
    assert published.read_bytes() == content and not recorded.exists()
    assert paths.archives() == [published]


def fake_archive(paths: ArchivePaths, last_used: float) -> Path:
    """A published archive of `paths`' key whose last use was `last_used` (epoch seconds)."""
    archive = published_as(paths, paths.key.encode())
    os.utime(archive, (last_used, last_used))
    return archive


def test_a_new_environment_does_not_evict_the_others(tmp_path):
    now = time.time()
    others = [fake_archive(ArchivePaths(tmp_path, f"a{n}"), now - 60 * n) for n in range(5)]
    newest = fake_archive(ArchivePaths(tmp_path, "b"), now)

    prune(tmp_path, newest, now)

    assert all(archive.exists() for archive in [*others, newest])


def test_pruning_keeps_each_keys_newest_archive_and_drops_the_unused(tmp_path, monkeypatch):
    monkeypatch.setattr(class_archive, "KEPT_ARCHIVES", 3)
    now = time.time()
    paths = ArchivePaths(tmp_path, "aa")
    superseded = fake_archive(paths, now - 100)
    newest = paths.published(7, "0" * 64)
    newest.write_bytes(b"current")
    unused = fake_archive(ArchivePaths(tmp_path, "bb"), now - class_archive.UNUSED_SECONDS - 1)
    recent = [fake_archive(ArchivePaths(tmp_path, f"c{n}"), now - n) for n in range(3)]
    legacy = tmp_path / "driver-0123456789abcdef0123.jsa"  # an older jetspark's: no record
    legacy.write_bytes(b"")
    unrelated = tmp_path / "notes.txt"
    unrelated.write_text("")

    prune(tmp_path, newest, now)

    left = sorted(tmp_path.iterdir())
    assert left == sorted([newest, recent[0], recent[1], unrelated])
    assert not any(path.exists() for path in [superseded, unused, recent[2], legacy])


@needs_java
def test_an_archive_for_another_class_path_is_not_published(tmp_path):
    from pyspark.find_spark_home import _find_spark_home

    jar = next((Path(_find_spark_home()) / "jars").glob("spark-launcher*.jar"))
    recorded = tmp_path / "recorded.jsa"
    paths = ArchivePaths(tmp_path, "ab")
    assert JAVA is not None
    # a JVM that loads classes of the jar, so the archive records its class path
    launcher = [str(JAVA), f"-XX:ArchiveClassesAtExit={recorded}", QUIET, "-cp", str(jar)]
    subprocess.run([*launcher, "org.apache.spark.launcher.Main"], capture_output=True)

    assert publish(recorded, paths, JAVA, str(tmp_path)) is None
    assert publish(recorded, paths, JAVA, str(jar)) is not None


def _jvm_ending_on_eof(
    archive: Path, class_path: str, exit_code: int = 0, pause: float = 0.0
) -> subprocess.Popen:
    """A process that, like PySpark's driver JVM, ends when its stdin closes: after `pause`
    seconds a JVM writes `archive` at its exit, then `exit_code`."""
    script = (
        f'cat >/dev/null; sleep {pause}; "{JAVA}" -XX:ArchiveClassesAtExit="{archive}" {QUIET} '
        f'-cp "{class_path}" -version 2>/dev/null; exit {exit_code}'
    )
    return subprocess.Popen(["sh", "-c", script], stdin=subprocess.PIPE)


@needs_java
def test_finishing_a_recording_ends_the_jvm_and_publishes_its_archive(
    archive_dir, spark_home, capsys
):
    recording = prepare(conf_with(), spark_home)
    assert recording is not None and JAVA is not None
    jvm = _jvm_ending_on_eof(recording.file, str(archive_dir), pause=1.5)

    assert recording.finish(jvm, JAVA, str(archive_dir))

    assert jvm.returncode == 0
    assert len(recording.paths.archives()) == 1
    assert not recording.file.exists() and not recording.paths.lock.exists()
    assert "saving the Spark driver's classes" in capsys.readouterr().err
    assert prepare(conf_with(), spark_home) is None


@needs_java
def test_a_jvm_that_fails_publishes_nothing_and_frees_the_lock(archive_dir, spark_home):
    recording = prepare(conf_with(), spark_home)
    assert recording is not None and JAVA is not None
    jvm = _jvm_ending_on_eof(recording.file, str(archive_dir), exit_code=3)

    assert not recording.finish(jvm, JAVA, str(archive_dir))

    assert recording.paths.archives() == []
    assert not recording.file.exists() and not recording.paths.lock.exists()
    assert isinstance(prepare(conf_with(), spark_home), Recording)


@needs_java
def test_finishing_leaves_a_lock_another_process_took_over(archive_dir, spark_home):
    recording = prepare(conf_with(), spark_home)
    assert recording is not None and JAVA is not None
    jvm = _jvm_ending_on_eof(recording.file, str(archive_dir), exit_code=3)
    recording.paths.lock.write_text(str(os.getppid()))  # taken over as stale meanwhile

    assert not recording.finish(jvm, JAVA, str(archive_dir))

    assert recording.paths.lock.read_text() == str(os.getppid())
    assert not recording.file.exists()


@needs_java
def test_a_forked_child_of_the_recorder_leaves_the_recording_alone(archive_dir, spark_home):
    recording = prepare(conf_with(), spark_home)
    assert recording is not None and JAVA is not None
    jvm = _jvm_ending_on_eof(recording.file, str(archive_dir))
    child = os.fork()
    if child == 0:  # what an atexit handler inherited by a forked child would do
        os._exit(3 if recording.finish(jvm, JAVA, str(archive_dir)) else 0)
    _, status = os.waitpid(child, 0)

    assert os.waitstatus_to_exitcode(status) == 0
    assert recording.paths.lock.exists() and jvm.poll() is None
    assert recording.finish(jvm, JAVA, str(archive_dir))


DRIVER = """
import sys
from jetspark.core.spark.session import create_context, stop_context

context = create_context("local[2]", "class-archive")
print(sum(context.parallelize(range(10), 2).map(lambda x: x * 2).collect()))
with open(f"/proc/{context._gateway.proc.pid}/maps") as maps:
    print("archive mapped" if sys.argv[1] in maps.read() else "no archive mapped")
stop_context(context)
"""


@pytest.mark.spark
@pytest.mark.timeout(900)  # two of the four drivers save an archive at exit: 10-70 s each
@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/PID/maps")
def test_drivers_start_from_the_saved_archive_and_a_damaged_one_is_saved_again(tmp_path):
    directory = tmp_path / "archives"
    environment = {
        **os.environ,
        class_archive.ENVIRONMENT_VARIABLE: str(directory),
        "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
    }

    def run(*arguments: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, *arguments]
        done = subprocess.run(
            command, env=environment, cwd=tmp_path, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr
        return done

    first = run("-c", DRIVER, str(directory))
    assert first.stdout == "90\nno archive mapped\n"
    (archive,) = directory.iterdir()
    assert archive.suffix == ".jsa"

    second = run("-c", DRIVER, str(directory))
    assert second.stdout == "90\narchive mapped\n"
    assert "saving" not in second.stderr

    damage(archive, "truncated")  # a full disk, say: mapped, it would kill the JVM with SIGBUS
    third = run("-c", DRIVER, str(directory))
    assert third.stdout == "90\nno archive mapped\n"
    assert f"not using the class archive {archive}: it has " in third.stderr
    assert not list(tmp_path.glob("hs_err_pid*.log"))
    (saved_again,) = directory.iterdir()
    assert saved_again.suffix == ".jsa"

    warm_up = run("-m", "jetspark.core", "warm-up", "--master", "local[1]")
    assert warm_up.stdout == f"the Spark driver started from its class archive {saved_again}\n"
