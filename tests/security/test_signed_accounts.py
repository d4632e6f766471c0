"""Account records signed with the cluster secret: an edit made straight in the catalog store
(a user made superuser, a grant widened or added, a password hash replaced, a token moved to
another user) gives nothing, and is logged once; records from before signing are refused
until ``gnomon admin users sign`` signs them; without a secret nothing is signed or checked."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from click.testing import CliRunner

from gnomon.config import NodeConfig
from gnomon.errors import Corrupted, InvalidArgument, Unauthenticated
from gnomon.peer import SECRET_ENV
from gnomon.store.api import StructuredStore, TableContext
from gnomon.store.sqlite import SqliteStore
from gnomon_app.accounts import users
from node.security.accounts import Accounts, _hash
from node.security.principal import EVERY_TABLE, Grant, Privilege

pytestmark = pytest.mark.unit

SECRET = "the-cluster-secret"
PASSWORD = "alice-password"


@pytest.fixture
def accounts(store: StructuredStore) -> Accounts:
    made = Accounts(store, cluster_secret=SECRET)
    made.create_user("alice", PASSWORD)
    made.grant("alice", Privilege.READ, "cpu")
    return made


def _grants(accounts: Accounts) -> tuple[Grant, ...]:
    return accounts.check_password("alice", PASSWORD).grants


def test_signed_records_are_believed(accounts: Accounts) -> None:
    principal = accounts.check_password("alice", PASSWORD)
    assert not principal.superuser
    assert principal.grants == (Grant("alice", "public", "cpu", Privilege.READ),)
    issued = accounts.issue_token("alice")
    assert accounts.check_token(issued.secret).name == "alice"


def test_a_user_made_superuser_in_the_store_cannot_log_in(
    store: StructuredStore, accounts: Accounts, caplog: pytest.LogCaptureFixture
) -> None:
    def promote(ctx: TableContext) -> None:
        users_table = ctx.table("auth_users")
        row = users_table.read({"name": "alice"})
        assert row is not None
        users_table.write({**row, "superuser": 1})

    store.transact(promote)
    with caplog.at_level(logging.WARNING, logger="gnomon.security"):
        for _ in range(3):
            with pytest.raises(Unauthenticated, match="wrong user name or password"):
                accounts.check_password("alice", PASSWORD)
        with pytest.raises(Unauthenticated):
            accounts.vouched("alice")
    refused = [r for r in caplog.records if "fails its signature check" in r.getMessage()]
    assert len(refused) == 1 and refused[0].__dict__["record"] == "user 'alice'"
    # Nor may its password be changed, which would sign what was edited.
    with pytest.raises(Corrupted, match="fails its signature check"):
        accounts.set_password("alice", "another-password")


def test_a_replaced_password_hash_lets_nobody_in(
    store: StructuredStore, accounts: Accounts
) -> None:
    def replace(ctx: TableContext) -> None:
        users_table = ctx.table("auth_users")
        row = users_table.read({"name": "alice"})
        assert row is not None
        salt = b"0123456789abcdef"
        users_table.write({**row, "salt": salt, "hash": _hash("mallory-password", salt)})

    store.transact(replace)
    with pytest.raises(Unauthenticated):
        accounts.check_password("alice", "mallory-password")


def test_widened_or_added_grants_are_ignored(store: StructuredStore, accounts: Accounts) -> None:
    def widen(ctx: TableContext) -> None:
        grants = ctx.table("auth_grants")
        grants.write({"user": "alice", "database": "public", "table": "cpu", "privilege": "admin"})
        grants.write(
            {"user": "alice", "database": "public", "table": EVERY_TABLE, "privilege": "admin"}
        )

    store.transact(widen)
    # The widened grant is refused whole: alice keeps no grant at all, let alone more.
    assert _grants(accounts) == ()


def test_a_token_moved_to_another_user_is_unknown(
    store: StructuredStore, accounts: Accounts
) -> None:
    accounts.create_user("root", "root-password", superuser=True)
    issued = accounts.issue_token("alice")

    def move(ctx: TableContext) -> None:
        tokens = ctx.table("auth_tokens")
        row = tokens.read({"token_id": issued.token.token_id})
        assert row is not None
        tokens.write({**row, "user": "root"})

    store.transact(move)
    with pytest.raises(Unauthenticated, match="unknown token"):
        accounts.check_token(issued.secret)


def test_another_secret_believes_nothing(store: StructuredStore, accounts: Accounts) -> None:
    with pytest.raises(Unauthenticated):
        Accounts(store, cluster_secret="another-secret").check_password("alice", PASSWORD)


def test_records_from_before_signing_are_refused_until_signed(
    store: StructuredStore, tmp_path: Path
) -> None:
    unsigned = Accounts(store)
    unsigned.create_user("alice", PASSWORD)
    unsigned.grant("alice", Privilege.WRITE, "cpu")
    # Without a secret (a standalone that has none) nothing is checked.
    assert _grants(unsigned) == (Grant("alice", "public", "cpu", Privilege.WRITE),)
    signed = Accounts(store, cluster_secret=SECRET)
    with pytest.raises(Unauthenticated):
        signed.check_password("alice", PASSWORD)
    assert signed.sign(dry_run=True) == [
        "user 'alice'",
        "SCRAM verifier of user 'alice'",
        "grant of write on public.cpu to 'alice'",
    ]
    with pytest.raises(Unauthenticated):
        signed.check_password("alice", PASSWORD)
    with pytest.raises(Unauthenticated):
        signed.scram_verifier("alice")
    assert len(signed.sign()) == 3
    assert signed.scram_verifier("alice") is not None
    assert _grants(signed) == (Grant("alice", "public", "cpu", Privilege.WRITE),)
    assert signed.sign() == []
    with pytest.raises(InvalidArgument, match="GNOMON_CLUSTER_SECRET"):
        unsigned.sign()


def test_revoked_grants_and_dropped_users_leave_no_signature(
    store: StructuredStore, accounts: Accounts
) -> None:
    accounts.issue_token("alice")
    accounts.revoke("alice", "cpu")
    assert _grants(accounts) == ()
    accounts.drop_user("alice")
    left = store.transact(lambda ctx: list(ctx.table("auth_signatures").scan()))
    assert left == []


def test_the_admin_cli_signs_with_the_secret_in_its_environment(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    runner = CliRunner()
    made = runner.invoke(users, ["create", "alice", "--password", PASSWORD, "--data-dir", data])
    assert made.exit_code == 0, made.output
    listed = runner.invoke(
        users, ["sign", "--dry-run", "--data-dir", data], env={SECRET_ENV: SECRET}
    )
    assert listed.exit_code == 0 and "unsigned: user 'alice'" in listed.output, listed.output
    signed = runner.invoke(users, ["sign", "--data-dir", data], env={SECRET_ENV: SECRET})
    assert signed.exit_code == 0 and "2 record(s) signed" in signed.output, signed.output
    store = SqliteStore(str(Path(data) / "meta.db"))
    try:
        principal = Accounts(store, cluster_secret=SECRET).check_password("alice", PASSWORD)
    finally:
        store.close()
    assert principal.name == "alice"
    # A cluster's catalog is never changed without the secret.
    refused = runner.invoke(users, ["list", "--catalog", "etcd://127.0.0.1:1/gnomon"])
    assert refused.exit_code == 2 and SECRET_ENV in refused.output


def test_a_node_with_auth_needs_the_cluster_secret() -> None:
    env = {
        "GNOMON_META": "m:1",
        "GNOMON_CATALOG": "etcd://e:1/gnomon",
        "GNOMON_ADVERTISE": "n:1",
        "GNOMON_AUTH": "true",
    }
    with pytest.raises(InvalidArgument, match="needs cluster_secret"):
        NodeConfig.load(env=env)
    assert NodeConfig.load(env={**env, "GNOMON_CLUSTER_SECRET": SECRET}).auth
