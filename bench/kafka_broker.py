"""A real Apache Kafka broker for the tests, the benchmarks and the examples: one process in
KRaft mode (broker and controller together) on 127.0.0.1, its data in a directory of the
caller's, started and stopped by PID.

Its jars come from Maven Central, resolved by `mvn` from `.ci/kafka-broker.pom.xml`
(`org.apache.kafka:kafka_2.13` and its dependencies) into a cache directory:
`$JETSPARK_KAFKA_JARS`, by default `~/.cache/jetspark/kafka-<version>`. `.ci/run` fills it
once (`python -m bench.kafka_broker fetch`); nothing is downloaded by URL and no jar is
committed.

`python -m bench.kafka_broker run DIRECTORY [--host ADDRESS]` runs one in the foreground for a
manual try (the examples' `--bootstrap-servers`), printing its address; Ctrl-C or SIGTERM stops
it.
"""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

KAFKA_VERSION = "4.1.1"
"""The broker's version: the one `.ci/kafka-broker.pom.xml` names."""

POM = Path(__file__).resolve().parent.parent / ".ci" / "kafka-broker.pom.xml"

START_TIMEOUT_SECONDS = 120.0
"""How long a broker may take to answer after its start (a loaded 2-core machine: ~10 s)."""


class BrokerError(RuntimeError):
    """The broker's jars are missing, or it did not start (the message quotes its log)."""


def jar_directory() -> Path:
    """Where the broker's jars are cached."""
    configured = os.environ.get("JETSPARK_KAFKA_JARS")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "jetspark" / f"kafka-{KAFKA_VERSION}"


def copy_dependencies(pom: Path, directory: Path, **defines: str) -> subprocess.CompletedProcess:
    """`mvn dependency:copy-dependencies` of `pom` into `directory`, with `-Dname=value` for
    each of `defines`: the artifacts of Maven Central, never a download URL."""
    directory.mkdir(parents=True, exist_ok=True)
    command = ["mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies"]
    command += [f"-DoutputDirectory={directory}", *(f"-D{k}={v}" for k, v in defines.items())]
    return subprocess.run(command, capture_output=True, text=True)


def fetch_jars(directory: Path | None = None) -> Path:
    """Resolves the broker's jars with `mvn` into `directory` (the cache) unless already there."""
    directory = directory or jar_directory()
    if any(directory.glob(f"kafka_2.13-{KAFKA_VERSION}.jar")):
        return directory
    done = copy_dependencies(POM, directory)
    if done.returncode != 0 or not any(directory.glob("kafka_2.13-*.jar")):
        raise BrokerError(
            f"mvn could not resolve Kafka {KAFKA_VERSION}'s jars into {directory} "
            f"(exit {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
        )
    return directory


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on `host` right now."""
    with closing(socket.socket()) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def _cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes in unpadded URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass
class KafkaBroker:
    """One single-node KRaft broker in `directory` (its data, configuration and log), listening
    on `host` (127.0.0.1 unless a test's network gives the broker a host of its own).

    `start()` formats the storage the first time and waits until the broker answers; `stop()`
    ends it by PID (SIGTERM, then SIGKILL), `kill()` at once; `start()` again restarts it on
    the same ports with the same data, as a restarted broker host would come back.
    """

    directory: Path
    host: str = "127.0.0.1"
    port: int = 0
    controller_port: int = 0
    jars: Path = field(default_factory=jar_directory)
    process: subprocess.Popen[bytes] | None = None

    def __post_init__(self) -> None:
        """Free ports unless given; a directory that held a broker before brings its ports
        back with its data."""
        self.port = self.port or free_port(self.host)
        self.controller_port = self.controller_port or free_port(self.host)
        configuration = self.directory / "server.properties"
        if configuration.exists():
            for line in configuration.read_text().splitlines():
                if line.startswith("listeners="):
                    for listener in line.split("=", 1)[1].split(","):
                        name, port = listener.split("://")[0], int(listener.rsplit(":", 1)[1])
                        if name == "PLAINTEXT":
                            self.port = port
                        else:
                            self.controller_port = port

    @property
    def bootstrap_servers(self) -> str:
        """The `bootstrap.servers` clients use."""
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.directory / "broker.log"

    def _configuration(self) -> Path:
        path = self.directory / "server.properties"
        if path.exists():
            return path
        settings = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@{self.host}:{self.controller_port}",
            "listeners": (
                f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}"
            ),
            "advertised.listeners": f"PLAINTEXT://{self.host}:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.directory / "data"),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "transaction.state.log.num.partitions": "4",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # a test's records are few and small: segments and checks sized for that
            "log.segment.bytes": str(16 * 1024 * 1024),
            # no deletion by age: the tests' records carry timestamps of 1970 (event time
            # that is easy to check), which the default 7-day retention deletes at its first
            # check, 5 minutes after the start, as if they had been read
            "log.retention.ms": "-1",
        }
        self.directory.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
        return path

    def _java(self, main_class: str, *arguments: str) -> list[str]:
        return [
            "java",
            "-Xms256m",
            "-Xmx768m",
            "-XX:+UseSerialGC",
            "-Djava.net.preferIPv4Stack=true",
            "-cp",
            f"{self.jars}/*",
            main_class,
            *arguments,
        ]

    def start(self) -> KafkaBroker:
        """Starts the broker (formatting its storage first, once) and waits until it answers."""
        if self.process is not None and self.process.poll() is None:
            return self
        if not any(self.jars.glob("kafka_2.13-*.jar")):
            raise BrokerError(
                f"no Kafka jars in {self.jars}: run `python -m bench.kafka_broker fetch` "
                "(bash .ci/run does) or point JETSPARK_KAFKA_JARS at them"
            )
        configuration = self._configuration()
        if not (self.directory / "data" / "meta.properties").exists():
            format_storage = self._java(
                "kafka.tools.StorageTool",
                "format",
                f"--cluster-id={_cluster_id()}",  # an id may start with "-"
                f"--config={configuration}",
            )
            done = subprocess.run(format_storage, capture_output=True, text=True)
            if done.returncode != 0:
                raise BrokerError(f"formatting the broker's storage failed:\n{done.stderr}")
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self._java("kafka.Kafka", str(configuration)),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self._wait_until_ready()
        return self

    def _wait_until_ready(self) -> None:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        admin = None
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise BrokerError(f"the broker exited at its start:\n{self._log_tail()}")
            if admin is None:  # the client only once the port listens: it logs every refusal
                try:
                    socket.create_connection((self.host, self.port), timeout=1).close()
                except OSError:
                    time.sleep(0.1)
                    continue
                admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
            try:
                metadata = admin.list_topics(timeout=2)
            except Exception:  # not answering yet
                continue
            if metadata.brokers:
                return
        self.kill()
        raise BrokerError(
            f"the broker did not answer within {START_TIMEOUT_SECONDS:.0f} s:\n{self._log_tail()}"
        )

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 60.0) -> None:
        """Ends the broker cleanly (SIGTERM), or with SIGKILL after `timeout` seconds."""
        self._signal(signal.SIGTERM, timeout)

    def kill(self) -> None:
        """Ends the broker at once (SIGKILL), as a crashed host."""
        self._signal(signal.SIGKILL, 30.0)

    def _signal(self, number: int, timeout: float) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            self.process = None
            return
        process.send_signal(number)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        self.process = None

    def restart(self) -> None:
        """Stops the broker cleanly and starts it again on the same ports and data."""
        self.stop()
        self.start()

    def create_topic(self, name: str, partitions: int = 1, **config: str) -> None:
        """Creates topic `name` (replication factor 1) and waits until it exists."""
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=config)
        admin.create_topics([topic])[name].result(60)

    def add_partitions(self, name: str, total: int) -> None:
        """Grows topic `name` to `total` partitions."""
        from confluent_kafka.admin import AdminClient, NewPartitions

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        admin.create_partitions([NewPartitions(name, total)])[name].result(60)


def main(arguments: list[str]) -> int:
    if arguments[:1] == ["fetch"]:
        print(fetch_jars())
        return 0
    if arguments[:1] == ["run"] and len(arguments) in (2, 4) and arguments[2:3] in ([], ["--host"]):
        host = arguments[3] if len(arguments) == 4 else "127.0.0.1"
        broker = KafkaBroker(Path(arguments[1]), host).start()
        # SIGTERM (a test's teardown) stops the broker as Ctrl-C does, by the finally below
        signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(0))
        print(f"Kafka {KAFKA_VERSION} on {broker.bootstrap_servers} (Ctrl-C stops it)", flush=True)
        try:
            while broker.process is not None and broker.process.poll() is None:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
        finally:
            broker.stop()
        return 0
    print(
        "usage: python -m bench.kafka_broker fetch | run DIRECTORY [--host ADDRESS]",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
