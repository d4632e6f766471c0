"""SCRAM-SHA-256: the exchange against RFC 7677's test vector, malformed messages refused as
such, and the verifiers accounts keep: made whenever a password is set, signed, not believed
once a password was set without one, and a mock one (the same each time) for a user who
does not exist."""

from __future__ import annotations

import base64
import logging

import pytest

from gnomon.errors import InvalidArgument, Unauthenticated
from gnomon.store.api import StructuredStore, TableContext
from node.security import scram
from node.security.accounts import _USERS, Accounts, _hash
from node.security.authn import Authenticator
from tests.pgwire.wire import client_final

pytestmark = pytest.mark.unit

SECRET = "the-cluster-secret"
PASSWORD = "alice-password"

# RFC 7677, section 3.
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _rfc_exchange(password: str = "pencil") -> scram.ServerExchange:
    return scram.ServerExchange(scram.verifier(password, RFC_SALT, 4096), RFC_SERVER_NONCE)


def test_the_rfc_7677_test_vector() -> None:
    exchange = _rfc_exchange()
    assert exchange.first(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    bare = RFC_CLIENT_FIRST.decode().removeprefix("n,,")
    assert client_final("pencil", bare, RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    assert exchange.final(RFC_CLIENT_FINAL.encode()) == RFC_SERVER_FINAL


def test_a_wrong_password_fails_the_proof() -> None:
    exchange = _rfc_exchange("not-pencil")
    exchange.first(RFC_CLIENT_FIRST)
    with pytest.raises(Unauthenticated):
        exchange.final(RFC_CLIENT_FINAL.encode())


def test_the_gs2_header_y_is_taken_and_must_be_echoed() -> None:
    bare = "n=,r=abc"
    exchange = scram.ServerExchange(scram.verifier(PASSWORD))
    server_first = exchange.first(f"y,,{bare}".encode())
    final = exchange.final(client_final(PASSWORD, bare, server_first, gs2="y,,").encode())
    assert final.startswith(b"v=")
    # A client that sent y,, but binds as if it had sent n,, is refused.
    other = scram.ServerExchange(scram.verifier(PASSWORD))
    server_first = other.first(f"y,,{bare}".encode())
    with pytest.raises(InvalidArgument, match="channel binding"):
        other.final(client_final(PASSWORD, bare, server_first, gs2="n,,").encode())


@pytest.mark.parametrize(
    ("first", "words"),
    [
        (b"", "gs2 header"),
        (b"n,,", "not a letter"),
        (b"x,,n=,r=abc", "channel binding flag"),
        (b"p=tls-server-end-point,,n=,r=abc", "offered SCRAM-SHA-256 only"),
        (b"n,a=admin,n=,r=abc", "authorization identities"),
        (b"n,,n=,r=abc,m=ext", "mandatory extensions"),
        (b"n,,r=abc,n=", "n= and r="),
        (b"n,,n=,r=", "not printable"),
        (b"n,,n=,r=a\x01b", "control character"),
        (b"n,,n=,r=abc,xyz", "not a letter"),
        (b"n,,n=\xff,r=abc", "not UTF-8"),
    ],
)
def test_a_malformed_client_first_is_refused(first: bytes, words: str) -> None:
    with pytest.raises(InvalidArgument, match=words):
        scram.ServerExchange(scram.verifier(PASSWORD)).first(first)


@pytest.mark.parametrize(
    ("final", "words"),
    [
        (RFC_CLIENT_FINAL.replace(",p=", ",q="), "no proof"),
        (RFC_CLIENT_FINAL.replace("c=biws", "c=eSws"), "channel binding"),
        (RFC_CLIENT_FINAL.replace("c=biws", "c=!!"), "invalid base64"),
        (RFC_CLIENT_FINAL.replace("c=biws", "c=\u00e9"), "invalid base64"),
        (RFC_CLIENT_FINAL.replace("rOprNG", "xOprNG"), "nonce"),
        (RFC_CLIENT_FINAL.replace("c=biws,", ""), "c= and r="),
        (RFC_CLIENT_FINAL.rpartition("=")[0] + "AAAA", "invalid base64"),
        (RFC_CLIENT_FINAL.rpartition(",p=")[0] + ",p=AAAA", "3 bytes"),
    ],
)
def test_a_malformed_client_final_is_refused(final: str, words: str) -> None:
    exchange = _rfc_exchange()
    exchange.first(RFC_CLIENT_FIRST)
    with pytest.raises(InvalidArgument, match=words):
        exchange.final(final.encode())


def test_a_client_final_first_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="before the client-first"):
        _rfc_exchange().final(RFC_CLIENT_FINAL.encode())


def test_passwords_are_saslprepped_as_postgresql_does() -> None:
    # RFC 4013's examples: a soft hyphen maps to nothing, a no-break space to a space.
    assert scram.verifier("I\u00adX-password", RFC_SALT) == scram.verifier("IX-password", RFC_SALT)
    assert scram.verifier("a\u00a0password", RFC_SALT) == scram.verifier("a password", RFC_SALT)
    # One SASLprep prohibits (a control character) is hashed as it is, not refused.
    assert scram.verifier("\u00e9\u0007password", RFC_SALT) != scram.verifier(
        "\u00e9password", RFC_SALT
    )


def test_a_mock_verifier_is_the_same_each_time_and_per_user() -> None:
    key = b"k" * 32
    assert scram.mock_verifier(key, "ghost") == scram.mock_verifier(key, "ghost")
    assert scram.mock_verifier(key, "ghost").salt != scram.mock_verifier(key, "other").salt
    assert scram.mock_verifier(key, "ghost").salt != scram.mock_verifier(b"j" * 32, "ghost").salt
    assert scram.mock_verifier(key, "ghost").iterations == scram.ITERATIONS


# -- the verifiers accounts keep ---------------------------------------------------------------


@pytest.fixture
def accounts(store: StructuredStore) -> Accounts:
    made = Accounts(store, cluster_secret=SECRET)
    made.create_user("alice", PASSWORD)
    return made


def _proves(verifier: scram.Verifier | None, password: str) -> bool:
    assert verifier is not None
    exchange = scram.ServerExchange(verifier)
    bare = "n=,r=nonce"
    server_first = exchange.first(f"n,,{bare}".encode())
    try:
        exchange.final(client_final(password, bare, server_first).encode())
    except Unauthenticated:
        return False
    return True


def test_a_password_set_keeps_its_verifier(accounts: Accounts) -> None:
    assert _proves(accounts.scram_verifier("alice"), PASSWORD)
    accounts.set_password("alice", "another-password")
    assert not _proves(accounts.scram_verifier("alice"), PASSWORD)
    assert _proves(accounts.scram_verifier("alice"), "another-password")
    accounts.drop_user("alice")
    with pytest.raises(Unauthenticated):
        accounts.scram_verifier("alice")
    accounts.create_user("alice", "a-third-password")
    assert _proves(accounts.scram_verifier("alice"), "a-third-password")


def test_an_account_from_before_verifiers_has_none(store: StructuredStore) -> None:
    Accounts(store, cluster_secret=SECRET).create_user("alice", PASSWORD)
    store.drop("auth_scram")  # as a catalog of a gnomon that kept no verifiers
    upgraded = Accounts(store, cluster_secret=SECRET)
    assert upgraded.scram_verifier("alice") is None
    assert upgraded.check_password("alice", PASSWORD).name == "alice"
    upgraded.set_password("alice", "another-password")
    assert _proves(upgraded.scram_verifier("alice"), "another-password")


def test_a_password_set_without_its_verifier_leaves_none(
    store: StructuredStore, accounts: Accounts
) -> None:
    # What a gnomon that keeps no verifiers does to an account that has one: a new hash,
    # signed, beside the old password's verifier.
    def set_hash_only(ctx: TableContext) -> None:
        row = ctx.table("auth_users").read({"name": "alice"})
        assert row is not None
        salt = b"s" * 16
        accounts._write(ctx, _USERS, {**row, "salt": salt, "hash": _hash("new-password", salt)})

    store.transact(set_hash_only)
    assert accounts.check_password("alice", "new-password").name == "alice"
    assert accounts.scram_verifier("alice") is None


def test_an_edited_verifier_is_refused_and_logged(
    store: StructuredStore, accounts: Accounts, caplog: pytest.LogCaptureFixture
) -> None:
    def replace(ctx: TableContext) -> None:
        table = ctx.table("auth_scram")
        row = table.read({"name": "alice"})
        assert row is not None
        forged = scram.verifier("the-attacker's", bytes(row["salt"]))
        table.write({**row, "stored_key": forged.stored_key, "server_key": forged.server_key})

    store.transact(replace)
    with caplog.at_level(logging.WARNING, logger="gnomon.security"):
        assert accounts.scram_verifier("alice") is None
    refused = [r for r in caplog.records if "fails its signature check" in r.getMessage()]
    assert [r.__dict__["record"] for r in refused] == ["SCRAM verifier of user 'alice'"]
    # Signing again (after review) believes it once more.
    assert accounts.sign() == ["SCRAM verifier of user 'alice'"]
    assert _proves(accounts.scram_verifier("alice"), "the-attacker's")


def test_the_authenticator_mocks_unknown_users(accounts: Accounts, store: StructuredStore) -> None:
    authenticator = Authenticator(accounts, cluster_secret=SECRET)
    ghost = authenticator.scram_verifier("ghost")
    assert ghost is not None and ghost == authenticator.scram_verifier("ghost")
    assert not _proves(ghost, PASSWORD)
    # Every node of a cluster answers with the same mock salt.
    assert Authenticator(accounts, cluster_secret=SECRET).scram_verifier("ghost") == ghost
    assert _proves(authenticator.scram_verifier("alice"), PASSWORD)
    assert authenticator.scram_principal("alice").name == "alice"
    with pytest.raises(Unauthenticated):
        authenticator.scram_principal("ghost")
