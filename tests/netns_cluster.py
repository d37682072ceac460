"""A Spark standalone cluster spread over Linux network namespaces, as hosts of a real network
(no tests here; tests/test_netns_cluster.py and bench's cluster rows use it).

Four hosts, each a network namespace of its own with an address of 198.18.0.0/24 (a range
reserved for tests, RFC 2544) on a veth pair to a bridge in a fifth namespace: the driver, the
master and two workers (one core each). Every process of a host runs in its namespace and in a
mount namespace of its own (`unshare --mount`) where a private directory is bind-mounted on
`/tmp`; the hosts have one directory in common, `shared` (and the machine's other directories,
where Python and Spark are installed).

Everything is named after the process that made it (`jsn<pid>-<host>`), so a run killed before
its teardown is cleared by the next one (`clear_leftovers`). Needs root, `ip` and `unshare`
(`unavailable()` says why not); iptables for `firewall`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pyspark

SUBNET = "198.18.0"
HOSTS = {"driver": 10, "master": 11, "worker-0": 12, "worker-1": 13}
"""Each host's last address byte."""
WORKERS = ("worker-0", "worker-1")
MASTER_PORT, MASTER_UI_PORT, WORKER_PORT = 7077, 8080, 7078
PREFIX = f"jsn{os.getpid()}"
ROOT = Path("/var/tmp") / PREFIX
"""Outside /tmp, which every host replaces by its own."""
READY_TIMEOUT = 120.0
_NAME = re.compile(r"^jsn(\d+)-")
_SHORT = {"driver": "d", "master": "m", "worker-0": "w0", "worker-1": "w1"}


def address(host: str) -> str:
    return f"{SUBNET}.{HOSTS[host]}"


MASTER_URL = f"spark://{address('master')}:{MASTER_PORT}"


def _ip(*arguments: str, namespace: str | None = None) -> None:
    prefix = ["ip", "netns", "exec", namespace] if namespace else []
    subprocess.run([*prefix, "ip", *arguments], check=True, capture_output=True, text=True)


def unavailable() -> str | None:
    """Why namespaces cannot be made here, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "unshare", "iptables"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    probe = f"{PREFIX}-probe"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"ip netns add failed: {made.stderr.strip()}"
    try:
        mounted = subprocess.run(
            [*_in_namespace(probe, Path("/var/tmp")), "true"], capture_output=True, text=True
        )
    finally:
        subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    if mounted.returncode != 0:
        return f"a private /tmp cannot be mounted: {mounted.stderr.strip()}"
    return None


def _in_namespace(namespace: str, tmp: Path) -> list[str]:
    """The command prefix that runs a command in `namespace` with `tmp` as its /tmp."""
    script = 'mount --bind "$0" /tmp && exec "$@"'
    return ["ip", "netns", "exec", namespace, "unshare", "--mount", "sh", "-c", script, str(tmp)]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _namespaces() -> list[str]:
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in listing.splitlines() if line.strip()]


def remove_namespace(name: str) -> None:
    """Kills every process in namespace `name`, then deletes it (and its veth ends)."""
    for _attempt in range(50):
        pids = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True)
        alive = [int(pid) for pid in pids.stdout.split()]
        if not alive:
            break
        for pid in alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    subprocess.run(["ip", "netns", "del", name], capture_output=True)


def clear_leftovers() -> None:
    """Removes the namespaces and directories of runs whose process is gone."""
    for name in _namespaces():
        match = _NAME.match(name)
        if match and not _pid_alive(int(match.group(1))):
            remove_namespace(name)
    for directory in Path("/var/tmp").glob("jsn*"):
        match = _NAME.match(directory.name + "-")
        if match and not _pid_alive(int(match.group(1))):
            shutil.rmtree(directory, ignore_errors=True)


class NamespaceCluster:
    """The hosts, their processes and the shared directory; `start()` then `stop()`."""

    def __init__(self) -> None:
        self.shared = ROOT / "shared"
        self.daemons: dict[str, subprocess.Popen[bytes]] = {}
        self.spark_home = str(Path(pyspark.__file__).resolve().parent)

    def namespace(self, host: str) -> str:
        return f"{PREFIX}-{host}"

    def tmp(self, host: str) -> Path:
        """The directory `host` sees as /tmp, as the machine sees it."""
        return ROOT / "tmp" / host

    def log(self, host: str) -> Path:
        return ROOT / f"{host}.log"

    # --- the network ---------------------------------------------------------------------

    def start(self) -> None:
        """Makes the network and starts the master and both workers; returns once the master
        lists both workers as ALIVE."""
        clear_leftovers()
        self.shared.mkdir(parents=True)
        bridge = self.namespace("bridge")
        subprocess.run(["ip", "netns", "add", bridge], check=True)
        _ip("link", "add", "br0", "type", "bridge", namespace=bridge)
        _ip("link", "set", "br0", "up", namespace=bridge)
        for host, short in _SHORT.items():
            self.tmp(host).mkdir(parents=True)
            namespace, device = self.namespace(host), f"{PREFIX}{short}"
            subprocess.run(["ip", "netns", "add", namespace], check=True)
            _ip("link", "add", device, "netns", namespace, "type", "veth", "peer", "name",
                f"{device}b", "netns", bridge)  # fmt: skip
            _ip("link", "set", f"{device}b", "master", "br0", "up", namespace=bridge)
            _ip("link", "set", "lo", "up", namespace=namespace)
            _ip("addr", "add", f"{address(host)}/24", "dev", device, namespace=namespace)
            _ip("link", "set", device, "up", namespace=namespace)
        self.start_daemon("master")
        for worker in WORKERS:
            self.start_daemon(worker)
        self.wait_for_workers(len(WORKERS))

    def stop(self) -> None:
        """Stops every process of the hosts and removes the namespaces and directories, by
        name; safe to call more than once."""
        for process in self.daemons.values():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        for host in [*HOSTS, "bridge"]:
            remove_namespace(self.namespace(host))
        for process in self.daemons.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
        self.daemons.clear()
        shutil.rmtree(ROOT, ignore_errors=True)

    def set_link(self, host: str, up: bool) -> None:
        """Cuts `host` off the network (its packets go nowhere, nothing is refused) or
        connects it again."""
        device = f"{PREFIX}{_SHORT[host]}"
        _ip("link", "set", device, "up" if up else "down", namespace=self.namespace(host))

    def vanish(self, worker: str) -> None:
        """The worker's host vanishes: cut off the network first (its connections see no
        end), then its worker and executors killed."""
        self.set_link(worker, up=False)
        self.stop_daemon(worker)

    def bring_back(self, worker: str) -> None:
        """The worker's host back on the network, its worker started and registered again."""
        self.set_link(worker, up=True)
        self.start_daemon(worker)
        self.wait_for_workers(len(WORKERS))

    def run_driver_losing(self, argv: Sequence[str], work: Path, worker: str, vanish: bool) -> dict:
        """Runs a driver script (`python argv...`) on the driver host and, once it committed
        a snapshot in WORK/snapshots, loses `worker`: its host vanishes (`vanish`: WORK/vanished
        then holds CLOCK_MONOTONIC's time of it) or its worker is stopped (WORK/gate then
        created); the worker is back afterwards. The JSON of the script's last line."""
        driver = self.spawn("driver", [sys.executable, *argv])
        try:
            while not list((work / "snapshots").glob("snapshot-*/MANIFEST")):
                if driver.poll() is not None:
                    raise AssertionError(driver.communicate()[1][-4000:])
                time.sleep(0.05)
            if vanish:
                self.vanish(worker)
                (work / "vanished").write_text(repr(time.monotonic()))
            else:
                self.stop_daemon(worker)
                (work / "gate").touch()
            return self.driver_output(self.finish(driver, timeout=600), argv)
        finally:
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
            self.bring_back(worker)

    # --- processes ------------------------------------------------------------------------

    def env(self, host: str, **extra: str) -> dict[str, str]:
        """The environment of a process on `host`: the machine's, without the Spark addresses
        and gateway this test process may have set."""
        drop = ("SPARK_LOCAL_IP", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET", "SPARK_HOME")
        env = {key: value for key, value in os.environ.items() if key not in drop}
        env.update(SPARK_HOME=self.spark_home, PYSPARK_PYTHON=sys.executable, **extra)
        if host != "driver":  # where the daemons bind and their UIs listen
            env["SPARK_LOCAL_IP"] = address(host)
        return env

    def command(self, host: str, argv: Sequence[str]) -> list[str]:
        """`argv` as a command run on `host`."""
        return [*_in_namespace(self.namespace(host), self.tmp(host)), *argv]

    def spawn(self, host: str, argv: Sequence[str], **env: str) -> subprocess.Popen[str]:
        """Starts `argv` on `host`, its output captured, in a process group of its own."""
        return subprocess.Popen(
            self.command(host, argv),
            env=self.env(host, **env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def run(
        self, host: str, argv: Sequence[str], timeout: float, **env: str
    ) -> subprocess.CompletedProcess[str]:
        """Runs `argv` on `host` to its end (`spawn`), its process group killed if the run is
        interrupted or times out."""
        return self.finish(self.spawn(host, argv, **env), timeout)

    @staticmethod
    def finish(process: subprocess.Popen[str], timeout: float) -> subprocess.CompletedProcess[str]:
        """Waits for a `spawn`ed process's end, killing its process group if the wait is
        interrupted or times out."""
        try:
            out, err = process.communicate(timeout=timeout)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            raise
        return subprocess.CompletedProcess(process.args, process.returncode, out, err)

    def start_daemon(self, host: str) -> None:
        """Starts the master, or a worker of one core, on `host`, in a process group of its
        own (a worker's executors are its children, in the same group)."""
        if host == "master":
            daemon = "master.Master"
            arguments = ["--host", address(host), "--port", str(MASTER_PORT)]
            arguments += ["--webui-port", str(MASTER_UI_PORT)]
        else:
            daemon = "worker.Worker"
            arguments = [MASTER_URL, "--host", address(host), "--port", str(WORKER_PORT)]
            arguments += ["--cores", "1", "--memory", "1g", "--work-dir", "/tmp/work"]
        spark_class = str(Path(self.spark_home, "bin", "spark-class"))
        with self.log(host).open("ab") as output:
            self.daemons[host] = subprocess.Popen(
                self.command(host, [spark_class, f"org.apache.spark.deploy.{daemon}", *arguments]),
                env=self.env(host),
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def stop_daemon(self, host: str) -> None:
        """Kills the daemon of `host` and its children (a worker's executors)."""
        process = self.daemons.pop(host)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)

    def alive_workers(self) -> int:
        """How many workers the master's /json/ lists as ALIVE (0 while it does not answer)."""
        probe = (
            "import json, sys, urllib.request\n"
            "try:\n"
            f"    page = urllib.request.urlopen('http://{address('master')}:{MASTER_UI_PORT}"
            "/json/', timeout=2)\n"
            "    state = json.load(page)\n"
            "except (OSError, ValueError):\n"
            "    print(0); sys.exit()\n"
            "print(sum(w.get('state') == 'ALIVE' for w in state.get('workers', [])))\n"
        )
        result = self.run("driver", [sys.executable, "-c", probe], timeout=30)
        return int(result.stdout.strip() or 0)

    def wait_for_workers(self, count: int) -> None:
        """Returns once the master lists `count` workers as ALIVE; fails with the daemons' logs
        if one exits or READY_TIMEOUT passes first."""
        deadline = time.monotonic() + READY_TIMEOUT
        while self.alive_workers() != count:
            exited = [host for host, process in self.daemons.items() if process.poll() is not None]
            if exited or time.monotonic() > deadline:
                logs = "\n".join(
                    f"--- {host}\n{self.log(host).read_text()[-2000:]}" for host in self.daemons
                )
                raise RuntimeError(f"the cluster did not start (exited: {exited}):\n{logs}")
            time.sleep(1)

    # --- the driver -------------------------------------------------------------------------

    def run_driver(self, argv: Sequence[str], timeout: float = 600, **env: str) -> dict:
        """Runs a driver script (`python argv...`) on the driver host; returns the JSON of its
        last line of output, or fails with its error output."""
        return self.driver_output(self.run("driver", [sys.executable, *argv], timeout, **env), argv)

    @staticmethod
    def driver_output(result: subprocess.CompletedProcess[str], argv: Sequence[str]) -> dict:
        """The JSON of a driver script's last line of output; fails with its error output."""
        if result.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} failed:\n{result.stderr[-6000:]}")
        return json.loads(result.stdout.strip().splitlines()[-1])

    @contextlib.contextmanager
    def firewall(self, open_ports: dict[str, Sequence[str]]) -> Iterator[None]:
        """For the block, each host named in `open_ports` accepts new TCP connections only on
        its listed ports or port ranges ('7300:7316'), and from itself; everything else that
        comes in is dropped."""
        try:
            for host, ports in open_ports.items():
                accepted = ["-m", "state", "--state", "ESTABLISHED,RELATED"]
                rules = [
                    ["-A", "INPUT", "-i", "lo", "-j", "ACCEPT"],
                    ["-A", "INPUT", *accepted, "-j", "ACCEPT"],
                    *(
                        ["-A", "INPUT", "-p", "tcp", "--dport", port, "-j", "ACCEPT"]
                        for port in ports
                    ),
                    ["-P", "INPUT", "DROP"],
                ]
                for rule in rules:
                    subprocess.run(
                        ["ip", "netns", "exec", self.namespace(host), "iptables", *rule],
                        check=True,
                        capture_output=True,
                    )
            yield
        finally:
            for host in open_ports:
                for rule in (["-P", "INPUT", "ACCEPT"], ["-F", "INPUT"]):
                    subprocess.run(
                        ["ip", "netns", "exec", self.namespace(host), "iptables", *rule],
                        capture_output=True,
                    )


if __name__ == "__main__":  # python tests/netns_cluster.py: starts one, says so, stops it
    cluster = NamespaceCluster()
    try:
        cluster.start()
        print(f"up: {MASTER_URL}, shared {cluster.shared}")
    finally:
        cluster.stop()
