"""Where the members of a continuous job get the job's secret, decided on the driver at submit.

The job's secret keys the frames of every connection of the job (frames.py): whoever holds it can
speak for a member. Spark ships a task's bytes to its executor over its RPC, which
`spark.authenticate=true` authenticates but only `spark.network.crypto.enabled=true` or
`spark.ssl.rpc.enabled=true` (or `spark.ssl.enabled=true`) encrypts; Spark never sends its own
secret, so reading its traffic lets nobody in. So the job's secret travels inside the task only
where a passive observer cannot read it there, or where Spark has nothing secret either:

- Spark does not authenticate: the secret is random and travels with the task;
- Spark encrypts its RPC, or the master is local (the tasks never cross a network): it travels,
  derived from Spark's secret (security.py).

Otherwise the task carries a fresh public nonce instead (`ExecutorSecret`), and each member
derives the job's secret from it and Spark's secret, read on its executor, exactly as the driver
does (`job_secret`):

- a standalone worker (`spark://`, `local-cluster`) and Kubernetes start their executors with
  Spark's secret in the environment variable `_SPARK_AUTH_SECRET`, which the executors' Python
  workers inherit (tests/test_continuous_eavesdropper.py reads it there on `local-cluster`);
- on Kubernetes with `spark.authenticate.secret.executor.file` (else
  `spark.authenticate.secret.file`), the executors read Spark's secret from that file, which
  Spark takes base64-encoded, as the members do.

Elsewhere (YARN keeps Spark's secret in the executors' Hadoop credentials, which a Python worker
cannot read) the secret could only travel readable, and `spark.jetspark.continuous.plaintextSecret`
decides: `refuse` (the default) keeps what Spark promises in that setting, that reading its
traffic lets nobody act in the application: execution_mode=CONTINUOUS fails at submit saying why
and what to set, AUTO runs the job another way (modes.py); `warn` runs it, with a warning, for a
network the user trusts.
"""

from __future__ import annotations

import base64
import dataclasses
import hmac
import logging
import os
from typing import Protocol

NETWORK_CRYPTO = "spark.network.crypto.enabled"
SECRET_FILE = "spark.authenticate.secret.file"
EXECUTOR_SECRET_FILE = "spark.authenticate.secret.executor.file"
ENV_AUTH_SECRET = "_SPARK_AUTH_SECRET"
"""The environment variable a standalone worker or Kubernetes gives executors Spark's secret in."""
PLAINTEXT_SECRET = "spark.jetspark.continuous.plaintextSecret"
REFUSE, WARN = "refuse", "warn"
_EXECUTORS_WITH_SECRET = ("spark://", "local-cluster[", "k8s://")
"""Masters whose executors hold Spark's secret where a Python worker reads it."""
_KUBERNETES = "k8s://"

_log = logging.getLogger("jetspark.spark")


class SparkConf(Protocol):
    """What this module reads of Spark's configuration (the JVM's SparkConf, or a dict)."""

    def get(self, key: str, default: str | None, /) -> str | None: ...


class MemberSecretError(RuntimeError):
    """A member found no Spark secret on its executor to derive the job's secret from."""


def job_secret(spark_secret: bytes, nonce: bytes) -> bytes:
    """The job's secret, derived from Spark's and the job's nonce (the driver and the members
    alike)."""
    return hmac.digest(spark_secret, b"jetspark job " + nonce, "sha256")


@dataclasses.dataclass(frozen=True)
class ExecutorSecret:
    """What a task carries instead of the job's secret: a public nonce, from which and Spark's
    secret, read on the member's executor, the member derives the job's secret."""

    nonce: bytes
    secret_file: str | None = None
    """The file of Spark's secret on the executors; None: their environment holds it."""

    def job_secret(self) -> bytes:
        """The job's secret (MemberSecretError when this executor holds no Spark secret)."""
        return job_secret(self._spark_secret(), self.nonce)

    def _spark_secret(self) -> bytes:
        if self.secret_file is not None:
            try:
                with open(self.secret_file, "rb") as file:
                    return base64.b64encode(file.read())
            except OSError as error:
                raise MemberSecretError(
                    f"this executor cannot read Spark's secret file {self.secret_file} "
                    f"({EXECUTOR_SECRET_FILE}): {error}"
                ) from None
        secret = os.environ.get(ENV_AUTH_SECRET)
        if not secret:
            raise MemberSecretError(
                f"this executor's Python worker has no Spark secret in {ENV_AUTH_SECRET} to "
                f"derive the job's secret from: set {NETWORK_CRYPTO}=true, or "
                f"{PLAINTEXT_SECRET}={WARN} to let the job's secret travel with its tasks"
            )
        return secret.encode()


def travels_readable(master: str, authenticated: bool, encrypted: bool) -> bool:
    """Whether the job's secret, inside a task, would cross a network readable while Spark
    authenticates (`authenticated`) its RPC, encrypting it or not (`encrypted`)."""
    local = master == "local" or master.startswith("local[")
    return authenticated and not encrypted and not local


def plaintext_refusal(
    conf: SparkConf, master: str, *, authenticated: bool, encrypted: bool
) -> str | None:
    """Why a continuous job may not run on `master` under `conf`, where Spark authenticates
    (`authenticated`) and encrypts (`encrypted`) its RPC or not: its secret would travel
    readable and PLAINTEXT_SECRET refuses that; the message names what to set. Else None."""
    policy = (conf.get(PLAINTEXT_SECRET, None) or REFUSE).strip().lower()
    if policy not in (REFUSE, WARN):
        raise ValueError(f"{PLAINTEXT_SECRET} must be {REFUSE} or {WARN}, got {policy!r}")
    if (
        policy == WARN
        or not travels_readable(master, authenticated, encrypted)
        or master.startswith(_EXECUTORS_WITH_SECRET)
    ):
        return None
    return (
        f"spark.authenticate is true but Spark does not encrypt its RPC ({NETWORK_CRYPTO} and "
        "spark.ssl.rpc.enabled are false), and the Python workers of {master}'s executors cannot "
        "read Spark's secret to derive the job's secret from, so it would cross the network "
        "readable inside the job's tasks, letting whoever reads it speak for a member: set "
        f"{NETWORK_CRYPTO}=true (Spark then encrypts its RPC, and the job its connections), or "
        f"{PLAINTEXT_SECRET}={WARN} to run on a network you trust"
    )


def members_secret(
    conf: SparkConf, master: str, nonce: bytes, *, authenticated: bool, encrypted: bool
) -> ExecutorSecret | None:
    """What the tasks of a job whose secret derives from `nonce` carry instead of it (module
    docstring), or None when the secret travels with them, with a warning when readable
    (PLAINTEXT_SECRET=warn); ValueError when PLAINTEXT_SECRET refuses that."""
    if not travels_readable(master, authenticated, encrypted):
        return None
    if master.startswith(_EXECUTORS_WITH_SECRET):
        secret_file = None
        if master.startswith(_KUBERNETES):
            secret_file = conf.get(EXECUTOR_SECRET_FILE, None) or conf.get(SECRET_FILE, None)
        return ExecutorSecret(nonce, secret_file)
    refusal = plaintext_refusal(conf, master, authenticated=True, encrypted=False)
    if refusal is not None:
        raise ValueError(f"a continuous job cannot run: {refusal}")
    _log.warning(
        "spark.authenticate is true but Spark does not encrypt its RPC: the continuous job's "
        "secret crosses the network readable inside its tasks (%s=%s), and whoever reads it "
        "can speak for a member; set %s=true to encrypt",
        PLAINTEXT_SECRET,
        WARN,
        NETWORK_CRYPTO,
    )
    return None
