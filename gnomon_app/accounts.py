"""``gnomon admin users|grants|tokens``: the accounts of a deployment, changed directly in
its catalog store (a standalone's data directory while it runs or not; a cluster's etcd or
PostgreSQL catalog). Registered on the admin group by ``gnomon_app/cli.py``.

The first admin of a new deployment is made here (there is nobody yet to ask a server):
``gnomon admin users create root --superuser --data-dir DIR``.

A cluster's records are signed with its cluster secret (``node/security/signatures.py``), so
these commands take it from ``GNOMON_CLUSTER_SECRET`` as the nodes do; a standalone's are
signed only if it has one too. ``users sign`` signs records that do not verify again.
"""

from __future__ import annotations

import datetime
import functools
import getpass
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Any

import click
from rich.console import Console
from rich.table import Table as RichTable

from gnomon.config import EtcdSettings, options
from gnomon.errors import GnomonError, InvalidArgument
from gnomon.peer import SECRET_ENV
from node.backends import Storage, open_catalog
from node.security.accounts import Accounts
from node.security.principal import EVERY_TABLE, Privilege

console = Console()


@dataclass(frozen=True)
class _Catalog:
    """Where the accounts are: a standalone's data directory, or a cluster's catalog (on
    etcd: reached with the etcd settings)."""

    data_dir: str
    catalog: str | None
    etcd: EtcdSettings


def _store_options(fn: Callable[..., None]) -> Callable[..., None]:
    """The options that name the catalog (``--data-dir``, ``--catalog``, the etcd settings),
    handed to the command as one ``where``."""

    @functools.wraps(fn)
    def command(*args: Any, data_dir: str, catalog: str | None, **kwargs: Any) -> None:
        etcd_flags = {name: kwargs.pop(name) for name in _ETCD_FLAGS}
        try:
            etcd = EtcdSettings.load(flags=etcd_flags)
        except GnomonError as e:
            raise click.UsageError(e.message) from None
        fn(*args, where=_Catalog(data_dir, catalog, etcd), **kwargs)

    command = options(EtcdSettings)(command)
    command = click.option(
        "--catalog",
        default=None,
        help="A cluster's catalog: etcd://HOST:PORT/NAMESPACE or postgresql://... "
        "(the nodes' --catalog).",
    )(command)
    return click.option(
        "--data-dir",
        default="data/standalone",
        show_default=True,
        help="A standalone's data directory (its catalog is meta.db there).",
    )(command)


_ETCD_FLAGS = tuple(f.name for f in fields(EtcdSettings))


@contextmanager
def _accounts(where: _Catalog) -> Iterator[Accounts]:
    secret = os.environ.get(SECRET_ENV) or None
    if where.catalog is not None and secret is None:
        raise click.UsageError(
            f"a cluster's account records are signed with its cluster secret: set {SECRET_ENV} "
            "as the nodes have it"
        )
    try:
        storage = Storage(catalog=where.catalog or "sqlite", etcd=where.etcd.etcd_access())
        store = open_catalog(where.data_dir, storage)
    except GnomonError as e:
        raise click.UsageError(e.message) from None
    try:
        yield Accounts(store, cluster_secret=secret)
    except GnomonError as e:
        console.print(f"[red]error:[/red] {e.message}")
        raise SystemExit(1) from None
    finally:
        store.close()


def _password(given: str | None) -> str:
    if given is not None:
        return given
    first = getpass.getpass("password: ")
    if getpass.getpass("again: ") != first:
        raise click.UsageError("the passwords differ")
    return first


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _show(title: str, columns: list[str], rows: list[list[str]]) -> None:
    out = RichTable(title=title)
    for c in columns:
        out.add_column(c, overflow="fold")
    for r in rows:
        out.add_row(*r)
    console.print(out)


# -- users --------------------------------------------------------------------------------------


@click.group()
def users() -> None:
    """Users (passwords kept as salted scrypt hashes)."""


@users.command("create")
@click.argument("name")
@click.option("--password", default=None, help="The password (asked for when not given).")
@click.option("--superuser", is_flag=True, help="May do everything, on every table.")
@_store_options
def create_user(name: str, password: str | None, superuser: bool, where: _Catalog) -> None:
    with _accounts(where) as accounts:
        accounts.create_user(name, _password(password), superuser=superuser)
    console.print(f"user {name} created{' (superuser)' if superuser else ''}")


@users.command("password")
@click.argument("name")
@click.option("--password", default=None, help="The new password (asked for when not given).")
@_store_options
def set_password(name: str, password: str | None, where: _Catalog) -> None:
    with _accounts(where) as accounts:
        accounts.set_password(name, _password(password))
    console.print(f"password of {name} changed")


@users.command("drop")
@click.argument("name")
@_store_options
def drop_user(name: str, where: _Catalog) -> None:
    with _accounts(where) as accounts:
        accounts.drop_user(name)
    console.print(f"user {name} dropped, with its grants and tokens")


@users.command("list")
@_store_options
def list_users(where: _Catalog) -> None:
    with _accounts(where) as accounts:
        rows = [
            [u.name, "yes" if u.superuser else "", _when(u.created_ms)] for u in accounts.users()
        ]
    _show("users", ["user", "superuser", "created"], rows)


@users.command("sign")
@click.option("--dry-run", is_flag=True, help="Only list the records that would be signed.")
@_store_options
def sign(dry_run: bool, where: _Catalog) -> None:
    """Sign the user, token and grant records whose signature does not verify: those made
    before records were signed or under another cluster secret, and those edited outside
    gnomon. Whatever they say is vouched for from then on: list them with --dry-run and
    review them first."""
    with _accounts(where) as accounts:
        found = accounts.sign(dry_run=dry_run)
    for record in found:
        console.print(f"{'unsigned' if dry_run else 'signed'}: {record}")
    console.print(f"{len(found)} record(s) {'to sign' if dry_run else 'signed'}")


# -- grants -------------------------------------------------------------------------------------


@click.group()
def grants() -> None:
    """Privileges of users on tables: read < write < admin (see README, Security)."""


@grants.command("add")
@click.argument("user")
@click.argument("privilege", type=click.Choice([p.label for p in Privilege]))
@click.option("--table", default=EVERY_TABLE, show_default=True, help="A table, or * for all.")
@_store_options
def add_grant(user: str, privilege: str, table: str, where: _Catalog) -> None:
    with _accounts(where) as accounts:
        accounts.grant(user, Privilege.parse(privilege), table)
    console.print(f"{user} may {privilege} {table}")


@grants.command("remove")
@click.argument("user")
@click.option("--table", default=EVERY_TABLE, show_default=True)
@_store_options
def remove_grant(user: str, table: str, where: _Catalog) -> None:
    with _accounts(where) as accounts:
        accounts.revoke(user, table)
    console.print(f"grant of {user} on {table} removed")


@grants.command("list")
@click.option("--user", default=None)
@_store_options
def list_grants(user: str | None, where: _Catalog) -> None:
    with _accounts(where) as accounts:
        rows = [[g.user, g.database, g.table, g.privilege.label] for g in accounts.grants(user)]
    _show("grants", ["user", "database", "table", "privilege"], rows)


# -- tokens -------------------------------------------------------------------------------------


@click.group()
def tokens() -> None:
    """API tokens (sent as Authorization: Bearer TOKEN), with expiry and revocation."""


@tokens.command("create")
@click.argument("user")
@click.option("--ttl-s", type=float, default=None, help="Seconds until it expires (default never).")
@click.option("--note", default="", help="What the token is for.")
@_store_options
def create_token(user: str, ttl_s: float | None, note: str, where: _Catalog) -> None:
    if ttl_s is not None and ttl_s <= 0:
        raise click.UsageError(InvalidArgument("--ttl-s must be positive").message)
    with _accounts(where) as accounts:
        issued = accounts.issue_token(user, ttl_s=ttl_s, note=note)
    # The token alone on stdout, for scripts; it is shown this once.
    click.echo(issued.secret)


@tokens.command("revoke")
@click.argument("token_id")
@_store_options
def revoke_token(token_id: str, where: _Catalog) -> None:
    with _accounts(where) as accounts:
        accounts.revoke_token(token_id)
    console.print(f"token {token_id} revoked")


@tokens.command("list")
@click.option("--user", default=None)
@_store_options
def list_tokens(user: str | None, where: _Catalog) -> None:
    now = int(time.time() * 1000)
    with _accounts(where) as accounts:
        rows = [
            [t.token_id, t.user, t.state(now), _when(t.created_ms), _when(t.expires_ms), t.note]
            for t in accounts.tokens(user)
        ]
    _show("tokens", ["id", "user", "state", "created", "expires", "note"], rows)
