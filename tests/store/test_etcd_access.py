"""etcd with its own authentication and TLS, as a secured deployment runs it (client
certificates of a throwaway CA required, a user whose role covers only gnomon's namespace,
tokens that expire after a second unused): the store and the meta client work with the
credentials and keep working past a token's expiry; without them, with a wrong password or
outside the namespace, etcd refuses and the error says which setting is at fault."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from gnomon.config import MetaConfig
from gnomon.errors import GnomonError, InvalidArgument, Unavailable
from gnomon.etcd import EtcdAccess, parse_endpoints
from gnomon.store.etcd import EtcdStore
from meta.etcd import EtcdClient
from node.security.ca import make_ca
from testkit.etcd import EtcdServer

from .conformance import KV, read_row, write_rows

pytestmark = pytest.mark.integration

NAMESPACE = "/gnomon"
#: etcd drops a token unused this long (its --auth-token-ttl, seconds).
TOKEN_TTL_S = 1


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdServer]:
    root = tmp_path_factory.mktemp("etcd-secured")
    server = EtcdServer(root, tls=make_ca(root / "tls"), flags=(f"--auth-token-ttl={TOKEN_TTL_S}",))
    server.start()
    server.enable_auth(NAMESPACE)
    yield server
    server.stop()


def _store(server: EtcdServer, access: EtcdAccess, namespace: str | None = None) -> EtcdStore:
    namespace = namespace or f"{NAMESPACE}/{uuid.uuid4().hex}"
    return EtcdStore(server.endpoint, namespace=namespace, timeout_s=3.0, access=access)


def test_store_and_meta_client_work_with_the_credentials_past_token_expiry(
    secured: EtcdServer,
) -> None:
    store = _store(secured, secured.access)
    client = EtcdClient(secured.endpoint, timeout_s=3.0, access=secured.access)
    try:
        store.create(KV)
        write_rows(store, "kv", [{"k": "a", "v": 1}])
        lease = client.grant(30)
        key = f"{NAMESPACE}/meta/live/n1".encode()
        client.put(key, b"n1", lease=lease)
        # etcd drops the unused token: both ask for a new one and go on.
        time.sleep(TOKEN_TTL_S * 2.5)
        assert read_row(store, "kv", {"k": "a"}) == {"k": "a", "v": 1, "note": None}
        write_rows(store, "kv", [{"k": "b", "v": 2}])
        assert client.keepalive(lease) > 0
        assert client.get(key) == b"n1"
        client.revoke(lease)
        assert client.get(key) is None
    finally:
        store.close()
        client.close()


def test_without_a_user_etcd_refuses(secured: EtcdServer) -> None:
    # The client certificate alone names a user etcd does not know.
    certificate_only = EtcdAccess(
        ca=secured.access.ca, cert=secured.access.cert, key=secured.access.key
    )
    store = _store(secured, certificate_only, namespace=f"{NAMESPACE}/catalog")
    try:
        with pytest.raises(GnomonError, match="permission denied"):
            store.exists("auth_users")
    finally:
        store.close()


def test_without_a_client_certificate_or_tls_etcd_is_not_reached(secured: EtcdServer) -> None:
    assert secured.access.user is not None and secured.access.password is not None
    for access in (
        EtcdAccess(secured.access.user, secured.access.password, ca=secured.access.ca),
        EtcdAccess(secured.access.user, secured.access.password),
    ):
        store = _store(secured, access)
        try:
            with pytest.raises(Unavailable):
                store.exists("kv")
        finally:
            store.close()


def test_a_wrong_password_names_the_settings(secured: EtcdServer) -> None:
    access = secured.access
    assert access.user is not None
    wrong = EtcdAccess(access.user, "not-the-password", access.ca, access.cert, access.key)
    store = _store(secured, wrong)
    try:
        with pytest.raises(GnomonError, match=r"etcd_user, etcd_password"):
            store.exists("kv")
    finally:
        store.close()


def test_keys_outside_the_namespace_are_refused(secured: EtcdServer) -> None:
    store = _store(secured, secured.access, namespace=f"/elsewhere/{uuid.uuid4().hex}")
    try:
        with pytest.raises(GnomonError, match="lacks read and write permission"):
            store.create(KV)
    finally:
        store.close()


def test_a_user_given_before_etcd_turns_authentication_on_is_no_error(
    etcd: EtcdServer,
) -> None:
    """A deployment gets its credentials first and etcd its authentication after."""
    store = EtcdStore(
        etcd.endpoint,
        namespace=f"/test/{uuid.uuid4().hex}",
        access=EtcdAccess("gnomon", "any-password"),
    )
    try:
        store.create(KV)
        assert store.exists("kv")
    finally:
        store.close()


def test_tls_decides_the_endpoint_schemes() -> None:
    assert parse_endpoints("https://a:1,b:2", tls=True) == ["a:1", "b:2"]
    with pytest.raises(InvalidArgument, match=r"'http://a:1'.*over TLS"):
        parse_endpoints("http://a:1", tls=True)
    with pytest.raises(InvalidArgument, match=r"'https://a:1'.*needs etcd_ca"):
        EtcdStore("https://a:1")


def test_etcd_settings(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("s3cret\nignored\n")
    cfg = MetaConfig.load(
        env={"GNOMON_ETCD": "a:1", "GNOMON_ETCD_USER": "gnomon"},
        flags={"etcd_password_file": str(secret)},
    )
    assert cfg.etcd_access() == EtcdAccess("gnomon", "s3cret")
    for flags, message in (
        ({"etcd_user": "gnomon"}, "needs both etcd_user and etcd_password"),
        ({"etcd_password": "x"}, "needs both etcd_user and etcd_password"),
        ({"etcd_cert": "c.pem"}, "needs both etcd_cert and etcd_key"),
        (
            {"etcd_user": "g", "etcd_password": "x", "etcd_password_file": str(secret)},
            "not both",
        ),
        ({"etcd_user": "g", "etcd_password_file": str(tmp_path / "none")}, "cannot be read"),
    ):
        with pytest.raises(InvalidArgument, match=message):
            MetaConfig.load(env={"GNOMON_ETCD": "a:1"}, flags=flags)
