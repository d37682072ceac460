"""What secures a continuous job's connections, decided on the driver from Spark's own security
settings and shipped to the members with their task.

- The job's secret (32 bytes) keys the authenticated frames of every connection (frames.py).
  It is random per job; with `spark.authenticate=true` it is derived from Spark's secret
  (`spark.authenticate.secret`, or the one Spark generated, read from its SecurityManager) and
  fresh random bytes, so the one setting that authenticates Spark's connections secures the
  job's too.
- With `spark.network.crypto.enabled=true`, `spark.ssl.enabled=true` or
  `spark.ssl.rpc.enabled=true`, every connection runs over TLS. The key and certificate are
  Spark's own when `spark.ssl.rpc.privateKey` and `spark.ssl.rpc.certChain` (or the same under
  `spark.ssl.`) name PEM files, or `spark.ssl.rpc.keyStore` a PKCS12 keystore, which must then
  exist on every machine as Spark requires (each machine reads them); otherwise a key and a
  self-signed certificate made for the job on the driver (with the `cryptography` package)
  travel with the secret. Either way a connecting end trusts exactly that certificate. A JKS
  keystore, which Python cannot read, leaves the job its own certificate, with a warning.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import hmac
import logging
import os
import secrets
import socket
import ssl
import tempfile
from collections.abc import Iterator
from typing import Any

from jetspark.core.spark.continuous.frames import Frames, handshake

AUTHENTICATE = "spark.authenticate"
AUTHENTICATE_SECRET = "spark.authenticate.secret"
NETWORK_CRYPTO = "spark.network.crypto.enabled"
SSL_ENABLED = "spark.ssl.enabled"
SSL_RPC_ENABLED = "spark.ssl.rpc.enabled"
_SSL_NAMESPACES = ("spark.ssl.rpc.", "spark.ssl.")
_CERTIFICATE_DAYS = 3650
"""A job's own certificate outlives any job (it is trusted by nothing else)."""
_JKS_MAGIC = b"\xfe\xed\xfe\xed"

_log = logging.getLogger("jetspark.spark")


@dataclasses.dataclass(frozen=True)
class TlsMaterial:
    """A key and its certificate, as PEM bytes (made for the job), as the paths of Spark's PEM
    files, or as the path of Spark's PKCS12 keystore (files read on each machine)."""

    certificate: bytes | None = None
    key: bytes | None = None
    certificate_path: str | None = None
    key_path: str | None = None
    key_password: str | None = None
    keystore_path: str | None = None
    keystore_password: str | None = None

    def context(self, server_side: bool) -> ssl.SSLContext:
        """A TLS context for the accepting end (`server_side`, with the key) or the connecting
        end (trusting this certificate only; the peer's name is not checked, the certificate
        is pinned)."""
        if server_side:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.num_tickets = 0  # no session resumption: nothing is sent after a handshake
            with self._files() as (certificate, key):
                context.load_cert_chain(certificate, key, self.key_password)
        else:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
            if self.certificate_path is not None:
                context.load_verify_locations(cafile=self.certificate_path)
            else:
                context.load_verify_locations(cadata=self._pem()[0].decode())
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        return context

    @contextlib.contextmanager
    def _files(self) -> Iterator[tuple[str, str]]:
        """(certificate path, key path): Spark's files, or private temporary copies of the
        job's PEM bytes that exist only while the context loads them."""
        if self.certificate_path is not None:
            assert self.key_path is not None
            yield self.certificate_path, self.key_path
            return
        with tempfile.TemporaryDirectory(prefix="jetspark-tls-") as directory:  # mode 0700
            paths = []
            for name, content in zip(("certificate.pem", "key.pem"), self._pem(), strict=True):
                path = os.path.join(directory, name)
                descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(descriptor, "wb") as file:
                    file.write(content)
                paths.append(path)
            yield paths[0], paths[1]

    def _pem(self) -> tuple[bytes, bytes]:
        """(certificate chain, key) as PEM bytes: the job's own, or read from the keystore."""
        if self.keystore_path is None:
            return self.certificate or b"", self.key or b""
        return read_keystore(self.keystore_path, self.keystore_password)


@dataclasses.dataclass
class ChannelSecurity:
    """The job's secret and, when Spark encrypts, its TLS material (module docstring)."""

    secret: bytes
    tls: TlsMaterial | None = None
    _contexts: dict[bool, ssl.SSLContext] = dataclasses.field(
        default_factory=dict, repr=False, compare=False
    )

    def tls_context(self, server_side: bool) -> ssl.SSLContext | None:
        """The TLS context of one end (made once per process), or None without TLS."""
        if self.tls is None:
            return None
        if server_side not in self._contexts:
            self._contexts[server_side] = self.tls.context(server_side)
        return self._contexts[server_side]

    def handshake(
        self, connection: socket.socket, purpose: str, identity: int, initiator: bool
    ) -> Frames:
        """frames.handshake with the job's secret, over TLS when the job has it."""
        return handshake(
            connection,
            self.secret,
            purpose,
            identity,
            initiator,
            tls=self.tls_context(server_side=not initiator),
        )

    def __getstate__(self) -> dict[str, Any]:
        return {"secret": self.secret, "tls": self.tls, "_contexts": {}}


def security_of(context: Any) -> ChannelSecurity:
    """The security of a job submitted now on `context` (module docstring)."""
    conf = context._jsc.sc().conf()
    secret = secrets.token_bytes(32)
    if conf.getBoolean(AUTHENTICATE, False):
        secret = hmac.digest(_spark_secret(context, conf), b"jetspark job " + secret, "sha256")
    encrypted = (
        conf.getBoolean(NETWORK_CRYPTO, False)
        or conf.getBoolean(SSL_ENABLED, False)
        or conf.getBoolean(SSL_RPC_ENABLED, False)
    )
    if not encrypted:
        return ChannelSecurity(secret)
    return ChannelSecurity(secret, _spark_tls(conf) or job_certificate())


def _spark_secret(context: Any, conf: Any) -> bytes:
    """Spark's authentication secret: what its SecurityManager holds (the configured one, or
    the one it generated), else `spark.authenticate.secret`."""
    try:
        secret = spark_security_manager(context).getSecretKey()
    except Exception:  # py4j: Spark refused (no secret); the configuration may still name one
        secret = None
    if not secret:
        secret = conf.get(AUTHENTICATE_SECRET, "")
    if not secret:
        raise ValueError(
            f"{AUTHENTICATE} is true but Spark has no secret: set {AUTHENTICATE_SECRET}, or "
            "run on a cluster manager that generates one"
        )
    return str(secret).encode()


def spark_security_manager(context: Any) -> Any:
    """The driver's SparkEnv.securityManager, read through its field: Py4J cannot call a
    method of SparkEnv itself (looking its methods up loads classes PySpark's JVM lacks, and
    that breaks the gateway's connection)."""
    jvm = context._jvm
    field = jvm.java.lang.Class.forName("org.apache.spark.SparkEnv").getDeclaredField(
        "securityManager"
    )
    field.setAccessible(True)
    return field.get(context._jsc.sc().env())


def _spark_tls(conf: Any) -> TlsMaterial | None:
    """Spark's key and certificate, when its RPC SSL settings name PEM files or a PKCS12
    keystore (read here once, so that a wrong password fails the job at submit)."""

    def setting(name: str) -> str | None:
        for namespace in _SSL_NAMESPACES:
            value = conf.get(namespace + name, None)
            if value:
                return str(value)
        return None

    key, chain = setting("privateKey"), setting("certChain")
    if key is not None and chain is not None:
        password = setting("privateKeyPassword") or setting("keyPassword")
        return TlsMaterial(certificate_path=chain, key_path=key, key_password=password)
    keystore = setting("keyStore")
    if keystore is None:
        return None
    with open(keystore, "rb") as file:
        if file.read(len(_JKS_MAGIC)) == _JKS_MAGIC:
            _log.warning(
                "the keystore %s is a JKS keystore, which Python cannot read: continuous jobs "
                "use a certificate of their own (convert it to PKCS12 with keytool "
                "-importkeystore -deststoretype PKCS12, or set spark.ssl.rpc.privateKey and "
                "spark.ssl.rpc.certChain)",
                keystore,
            )
            return None
    password = setting("keyStorePassword")
    read_keystore(keystore, password)
    return TlsMaterial(keystore_path=keystore, keystore_password=password)


def read_keystore(path: str, password: str | None) -> tuple[bytes, bytes]:
    """(certificate chain, key) as PEM bytes from the PKCS12 keystore at `path`; a ValueError
    naming it when it holds no key or the password is wrong."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    with open(path, "rb") as file:
        data = file.read()
    try:
        key, certificate, chain = pkcs12.load_key_and_certificates(
            data, password.encode() if password else None
        )
    except ValueError as error:
        raise ValueError(f"the keystore {path} cannot be read: {error}") from None
    if key is None or certificate is None:
        raise ValueError(f"the keystore {path} holds no private key with its certificate")
    pem = serialization.Encoding.PEM
    certificates = b"".join(c.public_bytes(pem) for c in [certificate, *chain])
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return certificates, key_pem


def job_certificate() -> TlsMaterial:
    """A fresh P-256 key and a self-signed certificate for it, as PEM bytes."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "jetspark continuous job")])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=_CERTIFICATE_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )
    return TlsMaterial(
        certificate=certificate.public_bytes(serialization.Encoding.PEM),
        key=key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
