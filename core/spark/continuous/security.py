"""What secures a continuous job's connections, decided on the driver from Spark's own security
settings and shipped to the members with their task.

- The job's secret (32 bytes) keys the authenticated frames of every connection (frames.py).
  It is random per job; with `spark.authenticate=true` it is derived from Spark's secret
  (`spark.authenticate.secret`, or the one Spark generated, read from its SecurityManager) and
  fresh random bytes, so the one setting that authenticates Spark's connections secures the
  job's too. Where Spark authenticates without encrypting, the secret itself never travels:
  the tasks carry those random bytes, and each member derives it from Spark's secret on its
  executor, or the job does not run CONTINUOUS (secret_source.py).
- When Spark encrypts its RPC (`spark.network.crypto.enabled=true` or
  `spark.ssl.rpc.enabled=true`; `spark.ssl.enabled` alone is the UI's SSL), every connection
  runs over TLS, the frames' keys bound to the server's certificate in that session. The key
  and certificate are Spark's own when `spark.ssl.rpc.privateKey` and `spark.ssl.rpc.certChain`
  (each falling back to the same under `spark.ssl.`) name PEM files, or `spark.ssl.rpc.keyStore`
  a PKCS12 keystore; with `spark.ssl.rpc.trustStore` (PKCS12) a connecting end verifies the
  server's certificate against it (full chain) and, when the certificate names hosts, checks
  that it names the one connected to; without a truststore it trusts exactly the certificate of
  Spark's key pair. Spark's files must exist on every machine, as Spark requires (each machine
  reads its own; the driver reads them at submit, so a wrong password fails the job there).
  Otherwise a key and a self-signed certificate made for the job on the driver (with the
  `cryptography` package) travel with the secret and are trusted exactly. A JKS keystore or
  truststore, which Python cannot read, leaves the job its own certificate, with a warning.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import logging
import os
import secrets
import socket
import ssl
import tempfile
from collections.abc import Iterator
from typing import Any, Protocol

from jetspark.core.spark.continuous.frames import Frames, TlsContext, handshake
from jetspark.core.spark.continuous.secret_source import (
    ExecutorSecret,
    job_secret,
    members_secret,
    travels_readable,
)
from jetspark.core.spark.session import master_of

AUTHENTICATE = "spark.authenticate"
AUTHENTICATE_SECRET = "spark.authenticate.secret"
NETWORK_CRYPTO = "spark.network.crypto.enabled"
SSL_RPC_ENABLED = "spark.ssl.rpc.enabled"
_SSL_NAMESPACES = ("spark.ssl.rpc.", "spark.ssl.")
_CERTIFICATE_DAYS = 3650
"""A job's own certificate outlives any job (it is trusted by nothing else)."""
_JKS_MAGIC = b"\xfe\xed\xfe\xed"
_SECRET = {"secret": True}
"""Field metadata: the value never appears in a repr."""

_log = logging.getLogger("jetspark.spark")


class SparkConfLike(Protocol):
    """What is read of Spark's configuration (the JVM's SparkConf through Py4J, or a test's)."""

    def get(self, key: str, default: Any) -> Any: ...

    def getBoolean(self, key: str, default: bool) -> bool: ...


def _redacted_repr(instance: Any) -> str:
    """`Class(field=value, ...)` of a dataclass' set fields: secret ones `<hidden>`, bytes as
    their length."""
    shown = []
    for field in dataclasses.fields(instance):
        value = getattr(instance, field.name)
        if not field.repr or value is None:
            continue
        if field.metadata.get("secret"):
            text = "<hidden>"
        elif isinstance(value, bytes):
            text = f"<{len(value)} bytes>"
        else:
            text = repr(value)
        shown.append(f"{field.name}={text}")
    return f"{type(instance).__name__}({', '.join(shown)})"


@dataclasses.dataclass(frozen=True)
class SparkFile:
    """A file one of Spark's settings names: each machine reads its own copy."""

    setting: str
    path: str

    def read(self) -> bytes:
        """The file's bytes; FileNotFoundError naming the setting, the path and this machine
        when it is missing here."""
        try:
            with open(self.path, "rb") as file:
                return file.read()
        except FileNotFoundError:
            raise FileNotFoundError(
                f"{self.setting} names {self.path}, which does not exist on "
                f"{socket.gethostname()}: Spark's SSL files must exist on every machine"
            ) from None


@dataclasses.dataclass(frozen=True, repr=False)
class TlsMaterial:
    """A key and its certificate: as PEM bytes (made for the job), Spark's PEM files or Spark's
    PKCS12 keystore; with Spark's PKCS12 truststore when one is configured (module docstring).
    Its repr shows no key nor password; pickling carries everything."""

    certificate: bytes | None = None
    key: bytes | None = dataclasses.field(default=None, metadata=_SECRET)
    certificate_file: SparkFile | None = None
    key_file: SparkFile | None = None
    key_password: str | None = dataclasses.field(default=None, metadata=_SECRET)
    keystore: SparkFile | None = None
    keystore_password: str | None = dataclasses.field(default=None, metadata=_SECRET)
    truststore: SparkFile | None = None
    truststore_password: str | None = dataclasses.field(default=None, metadata=_SECRET)

    __repr__ = _redacted_repr

    def context(self, server_side: bool) -> TlsContext:
        """A TLS context for the accepting end (`server_side`, presenting the certificate) or
        the connecting end (verifying against the truststore and checking names, else trusting
        exactly the certificate)."""
        if server_side:
            chain, key, password = self._key_pair()
            context = TlsContext(ssl.PROTOCOL_TLS_SERVER)
            context.num_tickets = 0  # no session resumption: nothing is sent after a handshake
            with _private_files(chain, key) as (chain_path, key_path):
                context.load_cert_chain(chain_path, key_path, password)
            context.presented = ssl.PEM_cert_to_DER_cert(_first_certificate(chain))
        else:
            context = TlsContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False  # frames checks the names a certificate has
            if self.truststore is None:
                context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN  # the leaf is the anchor
                context.load_verify_locations(cadata=_first_certificate(self._key_pair()[0]))
            else:
                context.checks_names = True
                context.load_verify_locations(cadata=self.trusted_certificates())
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        return context

    def trusted_certificates(self) -> str:
        """The truststore's certificates as PEM (ValueError naming it when it holds none or
        the password is wrong)."""
        assert self.truststore is not None
        store = _read_pkcs12(self.truststore, self.truststore_password)
        certificates = [c.certificate for c in store.additional_certs]
        if store.cert is not None:
            certificates.insert(0, store.cert.certificate)
        if not certificates:
            raise ValueError(
                f"the {_store_name(self.truststore)} holds no certificate "
                f"({self.truststore.setting})"
            )
        return "".join(_pem(certificate).decode() for certificate in certificates)

    def _key_pair(self) -> tuple[bytes, bytes, str | None]:
        """(certificate chain, key, the key's password) as PEM bytes, from where they are."""
        if self.keystore is not None:
            return (*read_keystore(self.keystore, self.keystore_password), None)
        if self.certificate_file is not None and self.key_file is not None:
            return self.certificate_file.read(), self.key_file.read(), self.key_password
        return self.certificate or b"", self.key or b"", None


def _first_certificate(chain: bytes) -> str:
    """The first certificate (the leaf) of a PEM chain."""
    end = b"-----END CERTIFICATE-----"
    text = chain[: chain.index(end) + len(end)]
    return text[text.index(b"-----BEGIN CERTIFICATE-----") :].decode() + "\n"


@contextlib.contextmanager
def _private_files(*contents: bytes) -> Iterator[list[str]]:
    """Paths of private temporary copies of `contents`, existing only for the block (for
    ssl's loaders, which read files)."""
    with tempfile.TemporaryDirectory(prefix="jetspark-tls-") as directory:  # mode 0700
        paths = []
        for index, content in enumerate(contents):
            path = os.path.join(directory, f"{index}.pem")
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as file:
                file.write(content)
            paths.append(path)
        yield paths


@dataclasses.dataclass(repr=False)
class ChannelSecurity:
    """The job's secret and, when Spark encrypts, its TLS material (module docstring). Its repr
    shows neither; pickling carries both."""

    secret: bytes
    tls: TlsMaterial | None = None
    from_executor: ExecutorSecret | None = None
    """When set, the secret never travels: each member derives it on its executor
    (secret_source.py)."""
    readable: bool = False
    """Whether the secret crosses the network readable inside the tasks (Spark authenticates
    without encrypting, and `spark.jetspark.continuous.plaintextSecret=warn`): whoever reads
    it can speak for a member, so the driver decodes only plain data from members then."""
    _contexts: dict[bool, TlsContext] = dataclasses.field(
        default_factory=dict, repr=False, compare=False
    )

    __repr__ = _redacted_repr

    def tls_context(self, server_side: bool) -> TlsContext | None:
        """The TLS context of one end (made once per process), or None without TLS."""
        if self.tls is None:
            return None
        if server_side not in self._contexts:
            self._contexts[server_side] = self.tls.context(server_side)
        return self._contexts[server_side]

    def handshake(
        self,
        connection: socket.socket,
        purpose: str,
        identity: int,
        initiator: bool,
        peer_host: str | None = None,
    ) -> Frames:
        """frames.handshake with the job's secret, over TLS when the job has it; a connecting
        end's `peer_host` is the host it reached as named (the address connected to always
        counts)."""
        if not self.secret and self.from_executor is not None:  # a member's first handshake
            self.secret = self.from_executor.job_secret()
        return handshake(
            connection,
            self.secret,
            purpose,
            identity,
            initiator,
            tls=self.tls_context(server_side=not initiator),
            server_hostname=peer_host,
        )

    def __getstate__(self) -> dict[str, Any]:
        secret = self.secret if self.from_executor is None else b""
        return {
            "secret": secret,
            "tls": self.tls,
            "from_executor": self.from_executor,
            "readable": self.readable,
            "_contexts": {},
        }


def security_of(context: Any) -> ChannelSecurity:
    """The security of a job submitted now on `context` (module docstring)."""
    conf = context._jsc.sc().conf()
    nonce, tls = secrets.token_bytes(32), tls_of(conf)
    if not conf.getBoolean(AUTHENTICATE, False):
        return ChannelSecurity(nonce, tls)
    master, encrypted = master_of(context), tls is not None
    derived = members_secret(conf, master, nonce, authenticated=True, encrypted=encrypted)
    readable = derived is None and travels_readable(master, True, encrypted)
    secret = job_secret(_spark_secret(context, conf), nonce)
    return ChannelSecurity(secret, tls, derived, readable)


def tls_of(conf: SparkConfLike) -> TlsMaterial | None:
    """The TLS material of a job under Spark's `conf`: None unless Spark encrypts its RPC
    (module docstring)."""
    if not spark_encrypts(conf):
        return None
    return _spark_tls(conf) or job_certificate()


def spark_encrypts(conf: SparkConfLike) -> bool:
    """Whether Spark encrypts its RPC (module docstring)."""
    return bool(conf.getBoolean(NETWORK_CRYPTO, False) or conf.getBoolean(SSL_RPC_ENABLED, False))


def _spark_secret(context: Any, conf: SparkConfLike) -> bytes:
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


def _spark_tls(conf: SparkConfLike) -> TlsMaterial | None:
    """Spark's key and certificate, when its RPC SSL settings name PEM files or a PKCS12
    keystore, with its PKCS12 truststore when one is named (stores read here once, so that a
    wrong password fails the job at submit); None when there is none or Python cannot read
    one."""

    def setting(name: str) -> tuple[str, str] | None:
        """(the setting that gives `name`, its value): under spark.ssl.rpc., else spark.ssl."""
        for namespace in _SSL_NAMESPACES:
            value = conf.get(namespace + name, None)
            if value:
                return namespace + name, str(value)
        return None

    def file(name: str) -> SparkFile | None:
        found = setting(name)
        return None if found is None else SparkFile(*found)

    def password(*names: str) -> str | None:
        found = next(filter(None, map(setting, names)), None)
        return None if found is None else found[1]

    truststore = file("trustStore")
    if truststore is not None and _is_jks(truststore):
        return None
    key, chain, keystore = file("privateKey"), file("certChain"), file("keyStore")
    if key is not None and chain is not None:
        material = TlsMaterial(
            certificate_file=chain,
            key_file=key,
            key_password=password("privateKeyPassword", "keyPassword"),
        )
    elif keystore is not None and not _is_jks(keystore):
        material = TlsMaterial(keystore=keystore, keystore_password=password("keyStorePassword"))
        read_keystore(keystore, material.keystore_password)
    else:
        return None
    if truststore is None:
        return material
    material = dataclasses.replace(
        material, truststore=truststore, truststore_password=password("trustStorePassword")
    )
    material.trusted_certificates()
    return material


def _is_jks(store: SparkFile) -> bool:
    """True, with a warning, when `store` is a JKS keystore, which Python cannot read."""
    if store.read()[: len(_JKS_MAGIC)] != _JKS_MAGIC:
        return False
    _log.warning(
        "the %s is a JKS keystore, which Python cannot read (%s): continuous jobs use a "
        "certificate of their own (convert it to PKCS12 with keytool -importkeystore "
        "-deststoretype PKCS12, or set spark.ssl.rpc.privateKey and spark.ssl.rpc.certChain "
        "for the key pair)",
        _store_name(store),
        store.setting,
    )
    return True


def _store_name(store: SparkFile) -> str:
    """`keystore PATH` or `truststore PATH`, for messages."""
    return f"{store.setting.rsplit('.', 1)[-1].lower()} {store.path}"


def _read_pkcs12(store: SparkFile, password: str | None) -> Any:
    """The PKCS12 store's contents (cryptography's PKCS12KeyAndCertificates); a ValueError
    naming it when the password is wrong or it is no PKCS12 store."""
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        return pkcs12.load_pkcs12(store.read(), password.encode() if password else None)
    except ValueError as error:
        raise ValueError(
            f"the {_store_name(store)} cannot be read ({store.setting}): {error}"
        ) from None


def read_keystore(store: SparkFile, password: str | None) -> tuple[bytes, bytes]:
    """(certificate chain, key) as PEM bytes from the PKCS12 keystore `store`; a ValueError
    naming it when it holds no key or the password is wrong."""
    from cryptography.hazmat.primitives import serialization

    content = _read_pkcs12(store, password)
    if content.key is None or content.cert is None:
        raise ValueError(
            f"the {_store_name(store)} holds no private key with its certificate ({store.setting})"
        )
    certificates = [content.cert, *content.additional_certs]
    key = content.key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return b"".join(_pem(c.certificate) for c in certificates), key


def _pem(certificate: Any) -> bytes:
    """A cryptography certificate as PEM."""
    from cryptography.hazmat.primitives import serialization

    return certificate.public_bytes(serialization.Encoding.PEM)


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
