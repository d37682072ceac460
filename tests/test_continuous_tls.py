"""TLS of a continuous job's connections as Spark configures it (issue #44,
core/spark/continuous/security.py and frames.py): Spark's layout of one key pair per node and a
truststore connects; a certificate of the same CA for another host, or any certificate but the
node's own without a truststore, is refused; a relay terminating TLS with a certificate the
connecting end trusts fails the key proof; only Spark's RPC encryption settings turn TLS on;
reprs hide the secrets that pickling carries; a member lacking Spark's files is told which
setting names them. Real sockets on 127.0.0.1, no Spark."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import logging
import pickle
import select
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

from jetspark.core.spark.continuous.frames import (
    CONTROL,
    DRIVER,
    ForgedFrameError,
    Frames,
    HandshakeError,
    check_names,
)
from jetspark.core.spark.continuous.security import (
    NETWORK_CRYPTO,
    SSL_RPC_ENABLED,
    ChannelSecurity,
    TlsMaterial,
    tls_of,
)

WAIT = 120.0
"""A bound on a wait that only a hang reaches."""
SECRET = b"s" * 32
PASSWORD = "store password"
LOCAL_NAMES = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]


class FakeConf:
    """Spark's configuration as security.py reads it: get and getBoolean over a dict."""

    def __init__(self, settings: dict[str, str]) -> None:
        self._settings = settings

    def get(self, key: str, default: Any) -> Any:
        return self._settings.get(key, default)

    def getBoolean(self, key: str, default: bool) -> bool:
        value = self._settings.get(key)
        return default if value is None else value.lower() == "true"


# ------------------------------------------------------------------------------ certificates


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None,
    names: list[x509.GeneralName],
) -> x509.Certificate:
    """A certificate for `key` signed by `issuer` (self-signed, a CA, without one)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer[0].subject if issuer else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer[1] if issuer else key, hashes.SHA256())


class Authority:
    """A CA whose certificates go into PKCS12 keystores and a truststore under one folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.certificate = _certificate("jetspark test CA", self.key, None, [])

    def keystore(self, name: str, names: list[x509.GeneralName]) -> str:
        """A PKCS12 keystore of a fresh key, its certificate naming `names` and the CA."""
        key = ec.generate_private_key(ec.SECP256R1())
        certificate = _certificate(name, key, (self.certificate, self.key), names)
        path = self.folder / f"{name}.p12"
        path.write_bytes(
            pkcs12.serialize_key_and_certificates(
                name.encode(),
                key,
                certificate,
                [self.certificate],
                serialization.BestAvailableEncryption(PASSWORD.encode()),
            )
        )
        return str(path)

    def truststore(self) -> str:
        """A PKCS12 truststore holding the CA's certificate only."""
        path = self.folder / "truststore.p12"
        path.write_bytes(
            pkcs12.serialize_key_and_certificates(
                None,
                None,
                None,
                [self.certificate],
                serialization.BestAvailableEncryption(PASSWORD.encode()),
            )
        )
        return str(path)


@pytest.fixture(scope="module")
def authority(tmp_path_factory: pytest.TempPathFactory) -> Authority:
    return Authority(tmp_path_factory.mktemp("tls"))


def _spark_conf(keystore: str, truststore: str | None = None, namespace: str = "rpc.") -> FakeConf:
    """Spark's configuration of RPC SSL with a node's keystore (and the truststore)."""
    settings = {
        SSL_RPC_ENABLED: "true",
        f"spark.ssl.{namespace}keyStore": keystore,
        f"spark.ssl.{namespace}keyStorePassword": PASSWORD,
    }
    if truststore is not None:
        settings[f"spark.ssl.{namespace}trustStore"] = truststore
        settings[f"spark.ssl.{namespace}trustStorePassword"] = PASSWORD
    return FakeConf(settings)


def _node(keystore: str, truststore: str | None = None) -> ChannelSecurity:
    """The job's security on a node whose Spark has `keystore` (and `truststore`)."""
    return ChannelSecurity(SECRET, tls_of(_spark_conf(keystore, truststore)))


# ------------------------------------------------------------------------------- connections


@contextlib.contextmanager
def _server(
    security: ChannelSecurity,
) -> Iterator[tuple[tuple[str, int], Callable[[], tuple[socket.socket, Any]]]]:
    """(address, accepted) of a listener on 127.0.0.1 for the block: `accepted()` waits for
    the coordinator's handshake on its one connection and gives (its socket, its Frames or the
    error the handshake raised); the socket closes with the block."""
    outcome: dict[str, Any] = {}
    listener = socket.create_server(("127.0.0.1", 0))

    def accept() -> None:
        with contextlib.suppress(OSError):  # the listener closed: the test failed before
            connection, _ = listener.accept()
            outcome["socket"] = connection
            try:
                outcome["frames"] = security.handshake(connection, CONTROL, DRIVER, False)
            except ConnectionError as error:
                outcome["frames"] = error

    def accepted() -> tuple[socket.socket, Any]:
        thread.join(WAIT)
        assert not thread.is_alive()
        return outcome["socket"], outcome["frames"]

    thread = threading.Thread(target=accept)
    thread.start()
    try:
        yield listener.getsockname(), accepted
    finally:
        listener.close()
        thread.join(WAIT)
        if "socket" in outcome:
            outcome["socket"].close()


def _connect(security: ChannelSecurity, address: tuple[str, int]) -> tuple[socket.socket, Any]:
    """(socket, its Frames or the handshake's error) of a member connecting to `address`."""
    connection = socket.create_connection(address, timeout=WAIT)
    try:
        return connection, security.handshake(connection, CONTROL, 0, True)
    except ConnectionError as error:
        connection.close()
        return connection, error


def _round_trip(
    sender: socket.socket, sender_frames: Frames, receiver: socket.socket, receiver_frames: Frames
) -> bytes:
    """What `receiver` opens of a message `sender` seals."""
    wire = bytearray()
    sender_frames.seal(b"over TLS", wire)
    sender.sendall(wire)
    opened = bytearray(receiver_frames.early)
    while len(opened) < len(b"over TLS"):
        receiver_frames.open(receiver.recv(1 << 16), opened)
    return bytes(opened)


def _connected(server: ChannelSecurity, client: ChannelSecurity) -> tuple[Any, Any]:
    """(the client's outcome, the server's) of a connection from `client` to `server`: each
    end's Frames, or the error its handshake raised."""
    with _server(server) as (address, accepted):
        connection, client_outcome = _connect(client, address)
        connection.close()
        return client_outcome, accepted()[1]


def test_spark_s_layout_a_key_pair_per_node_and_a_truststore_connects(
    authority: Authority,
) -> None:
    truststore = authority.truststore()
    driver = _node(authority.keystore("driver", LOCAL_NAMES), truststore)
    member = _node(authority.keystore("member", LOCAL_NAMES), truststore)
    with _server(driver) as (address, accepted):
        connection, frames = _connect(member, address)
        try:
            server, server_frames = accepted()
            assert isinstance(frames, Frames) and frames.encrypted
            assert isinstance(server_frames, Frames)
            assert _round_trip(connection, frames, server, server_frames) == b"over TLS"
            assert _round_trip(server, server_frames, connection, frames) == b"over TLS"
        finally:
            connection.close()


def test_with_a_truststore_a_certificate_naming_no_host_is_trusted_on_its_chain(
    authority: Authority,
) -> None:
    truststore = authority.truststore()
    driver = _node(authority.keystore("nameless", []), truststore)
    member = _node(authority.keystore("member", LOCAL_NAMES), truststore)
    client, server = _connected(driver, member)
    assert isinstance(client, Frames) and isinstance(server, Frames)


@pytest.mark.skipif(shutil.which("keytool") is None, reason="the JDK's keytool is not installed")
def test_a_truststore_made_by_keytool_is_read(authority: Authority, tmp_path: Path) -> None:
    """Spark's truststores come from keytool (PKCS12, its default type since Java 9)."""
    certificate = tmp_path / "ca.pem"
    certificate.write_bytes(authority.certificate.public_bytes(serialization.Encoding.PEM))
    truststore = str(tmp_path / "keytool-truststore.p12")
    store = ["-keystore", truststore, "-storetype", "PKCS12", "-storepass", PASSWORD]
    subprocess.run(
        ["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", str(certificate), *store],
        check=True,
        capture_output=True,
        timeout=WAIT,
    )
    driver = _node(authority.keystore("driver", LOCAL_NAMES), truststore)
    member = _node(authority.keystore("member", LOCAL_NAMES), truststore)
    client, server = _connected(driver, member)
    assert isinstance(client, Frames) and isinstance(server, Frames)


@pytest.mark.parametrize(
    ("names", "hosts", "named"),
    [
        ((), ["10.0.0.1"], True),
        ((("DNS", "Node-1.Cluster"),), ["10.0.0.1", "node-1.cluster."], True),
        ((("DNS", "*.cluster"),), ["node-1.cluster"], True),
        ((("DNS", "*.cluster"),), ["a.node-1.cluster", "cluster"], False),
        ((("IP Address", "2001:DB8:0:0:0:0:0:1"),), ["2001:db8::1"], True),
        ((("IP Address", "10.0.0.2"), ("DNS", "10.0.0.1")), ["10.0.0.1"], False),
    ],
    ids=["no name", "dns", "wildcard", "wildcard, one label", "ipv6", "ip by ip names only"],
)
def test_a_certificate_naming_hosts_must_name_one_connected_to(
    names: tuple[tuple[str, str], ...], hosts: list[str], named: bool
) -> None:
    assert check_names({"subjectAltName": names}, hosts) is named


def test_another_service_s_certificate_from_the_same_ca_is_refused(authority: Authority) -> None:
    truststore = authority.truststore()
    other = [x509.DNSName("other.example")]
    impostor = _node(authority.keystore("other-service", other), truststore)
    member = _node(authority.keystore("member", LOCAL_NAMES), truststore)
    client, server = _connected(impostor, member)
    assert isinstance(client, HandshakeError)
    assert "its certificate names other hosts than 127.0.0.1" in str(client)
    assert isinstance(server, ConnectionError)  # the member hung up


def test_without_a_truststore_only_the_node_s_own_certificate_is_trusted(
    authority: Authority,
) -> None:
    """Pinned: the chain's CA is not trusted, so another node of that CA is refused."""
    keystore = authority.keystore("shared", LOCAL_NAMES)
    same_pair, other_pair = _node(keystore), _node(authority.keystore("other", LOCAL_NAMES))
    client, _ = _connected(same_pair, _node(keystore))
    assert isinstance(client, Frames)
    client, _ = _connected(other_pair, same_pair)
    assert isinstance(client, HandshakeError) and "CERTIFICATE_VERIFY_FAILED" in str(client)


def _relay(
    listener: socket.socket, presented: TlsMaterial, trusting: TlsMaterial, server: Any
) -> Callable[[], None]:
    """A relay accepting one connection on `listener`, terminating its TLS with `presented`,
    and forwarding the plain bytes over its own TLS connection (trusting `trusting`) to
    `server`: what a thread runs."""

    def run() -> None:
        accepted, _ = listener.accept()
        with contextlib.ExitStack() as stack:
            stack.callback(accepted.close)
            try:
                near = presented.context(server_side=True).wrap_socket(accepted, server_side=True)
                stack.callback(near.close)
                far = trusting.context(server_side=False).wrap_socket(
                    socket.create_connection(server, timeout=WAIT)
                )
                stack.callback(far.close)
                ends = {near: far, far: near}
                while True:
                    ready = [end for end in ends if end.pending()]
                    ready = ready or select.select(list(ends), [], [], WAIT)[0]
                    if not ready:
                        return
                    for end in ready:
                        data = end.recv(1 << 16)
                        if not data:
                            return
                        ends[end].sendall(data)
            except OSError:  # an end gave up: the relay ends with it
                return

    return run


@pytest.mark.parametrize("relay_has_the_server_s_key", [False, True])
def test_a_relay_terminating_tls_with_a_trusted_certificate_fails_the_key_proof(
    authority: Authority, relay_has_the_server_s_key: bool
) -> None:
    """The relay's certificate is trusted and names 127.0.0.1, so TLS succeeds on both legs;
    the frames' keys are bound to each leg's server certificate, so they differ. With the
    server's own key pair (the control) the relayed connection works."""
    truststore = authority.truststore()
    driver_keystore = authority.keystore("driver", LOCAL_NAMES)
    driver = _node(driver_keystore, truststore)
    member = _node(authority.keystore("member", LOCAL_NAMES), truststore)
    relay_keystore = driver_keystore if relay_has_the_server_s_key else None
    relay_material = _node(relay_keystore or authority.keystore("relay", LOCAL_NAMES)).tls
    assert relay_material is not None and member.tls is not None
    with (
        _server(driver) as (address, accepted),
        socket.create_server(("127.0.0.1", 0)) as listener,
    ):
        relay = threading.Thread(target=_relay(listener, relay_material, member.tls, address))
        relay.start()
        connection, client = _connect(member, listener.getsockname())
        connection.close()
        relay.join(WAIT)
        assert not relay.is_alive()
        server = accepted()[1]
    if relay_has_the_server_s_key:
        assert isinstance(client, Frames) and isinstance(server, Frames)
    else:
        assert isinstance(client, ForgedFrameError) and "failed authentication" in str(client)
        assert isinstance(server, ConnectionError)


# ------------------------------------------------------------------------ Spark's settings


@pytest.mark.parametrize(
    ("settings", "encrypted"),
    [
        ({"spark.ssl.enabled": "true"}, False),
        ({SSL_RPC_ENABLED: "true"}, True),
        ({NETWORK_CRYPTO: "true"}, True),
        ({}, False),
    ],
    ids=["spark.ssl.enabled (the UI's)", "ssl.rpc.enabled", "network.crypto.enabled", "none"],
)
def test_only_spark_s_rpc_encryption_settings_turn_tls_on(
    settings: dict[str, str], encrypted: bool
) -> None:
    assert (tls_of(FakeConf(settings)) is not None) is encrypted


def test_spark_ssl_settings_fall_back_from_the_rpc_namespace(authority: Authority) -> None:
    keystore, truststore = authority.keystore("node", LOCAL_NAMES), authority.truststore()
    tls = tls_of(_spark_conf(keystore, truststore, namespace=""))
    assert tls is not None and tls.keystore is not None and tls.truststore is not None
    assert (tls.keystore.setting, tls.keystore.path) == ("spark.ssl.keyStore", keystore)
    assert (tls.truststore.setting, tls.truststore.path) == ("spark.ssl.trustStore", truststore)


def test_a_wrong_truststore_password_fails_at_submit_naming_the_truststore(
    authority: Authority,
) -> None:
    truststore = authority.truststore()
    conf = _spark_conf(authority.keystore("node", LOCAL_NAMES), truststore)
    conf._settings["spark.ssl.rpc.trustStorePassword"] = "wrong"
    with pytest.raises(ValueError, match=f"the truststore {truststore} cannot be read"):
        tls_of(conf)


def test_a_jks_truststore_leaves_the_job_its_own_certificate_with_a_warning(
    authority: Authority, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    jks = tmp_path / "truststore.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + b"\0" * 60)  # what keytool -storetype JKS starts with
    conf = _spark_conf(authority.keystore("node", LOCAL_NAMES), str(jks))
    with caplog.at_level(logging.WARNING, logger="jetspark.spark"):
        tls = tls_of(conf)
    assert tls is not None and tls.certificate is not None and tls.truststore is None
    [warning] = [record.getMessage() for record in caplog.records]
    assert warning.startswith(f"the truststore {jks} is a JKS keystore")


def test_reprs_hide_the_secrets_that_pickling_carries(authority: Authority) -> None:
    security = _node(authority.keystore("node", LOCAL_NAMES), authority.truststore())
    job_own = ChannelSecurity(SECRET, tls_of(FakeConf({NETWORK_CRYPTO: "true"})))
    assert job_own.tls is not None and job_own.tls.key is not None
    for shown in (security, job_own):
        text = repr(shown)
        assert "secret=<32 bytes>" in text
        assert SECRET.decode() not in text and PASSWORD not in text
        assert "PRIVATE KEY" not in text and job_own.tls.key.decode()[40:80] not in text
        assert pickle.loads(pickle.dumps(shown)) == shown
    assert "keystore_password=<hidden>" in repr(security)
    assert "key=<hidden>" in repr(job_own)
    carried = pickle.loads(pickle.dumps(security))
    assert carried.secret == SECRET and carried.tls is not None
    assert carried.tls.keystore_password == PASSWORD


@pytest.mark.parametrize(
    ("server_side", "setting"),
    [(True, "spark.ssl.rpc.keyStore"), (False, "spark.ssl.rpc.trustStore")],
)
def test_a_member_lacking_spark_s_file_is_told_the_setting_and_the_path(
    authority: Authority, tmp_path: Path, server_side: bool, setting: str
) -> None:
    keystore = tmp_path / "node.p12"
    truststore = tmp_path / "truststore.p12"
    keystore.write_bytes(Path(authority.keystore("node", LOCAL_NAMES)).read_bytes())
    truststore.write_bytes(Path(authority.truststore()).read_bytes())
    shipped = pickle.dumps(_node(str(keystore), str(truststore)))  # read on the driver
    missing = keystore if server_side else truststore
    missing.unlink()  # as on an executor without the file
    member = pickle.loads(shipped)
    with pytest.raises(FileNotFoundError, match=f"{setting} names {missing}, which does not"):
        member.tls_context(server_side)


def test_spark_s_pem_files_are_used_and_the_chain_s_leaf_is_what_is_presented(
    authority: Authority,
) -> None:
    """Spark's PEM layout: certChain (the leaf, then the CA) and an encrypted privateKey."""
    folder = authority.folder
    key = ec.generate_private_key(ec.SECP256R1())
    certificate = _certificate("pem", key, (authority.certificate, authority.key), LOCAL_NAMES)
    chain, key_path = folder / "chain.pem", folder / "key.pem"
    pem = serialization.Encoding.PEM
    chain.write_bytes(b"".join(c.public_bytes(pem) for c in [certificate, authority.certificate]))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(PASSWORD.encode()),
        )
    )
    conf = FakeConf(
        {
            SSL_RPC_ENABLED: "true",
            "spark.ssl.rpc.certChain": str(chain),
            "spark.ssl.rpc.privateKey": str(key_path),
            "spark.ssl.rpc.privateKeyPassword": PASSWORD,
        }
    )
    tls = tls_of(conf)
    assert tls is not None and tls.certificate_file is not None and tls.key_file is not None
    assert tls.certificate_file.path == str(chain) and tls.key_file.path == str(key_path)
    client, server = _connected(ChannelSecurity(SECRET, tls), ChannelSecurity(SECRET, tls))
    assert isinstance(client, Frames) and isinstance(server, Frames)
    presented = tls.context(server_side=True).presented
    assert presented == certificate.public_bytes(serialization.Encoding.DER)
