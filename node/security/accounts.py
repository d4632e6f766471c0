"""Users, API tokens and grants, kept in the catalog through the StructuredTable SPI (the
standalone's SQLite file, a cluster's etcd or PostgreSQL), so every node of a cluster sees the
same accounts.

Passwords and token secrets are stored only as salted scrypt hashes (``hashlib.scrypt``,
n=2**14, r=8, p=1: about 16 MiB and tens of milliseconds per check, which is what makes a
stolen table slow to attack; the authenticator caches successful checks briefly so a busy
client does not pay it per request). A token reads ``gnm_<id>.<secret>``: the id finds its
row, the secret is checked against the row's hash. Tokens expire (optionally) and are revoked
by marking their row, which stays for the audit trail.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

from gnomon.errors import AlreadyExists, InvalidArgument, NotFound, Unauthenticated
from gnomon.store.api import KeyRange, StructuredStore, TableContext, run_with_retries
from gnomon.store.spec import FieldSpec, FieldType, TableSpec
from node.security.principal import DATABASE, EVERY_TABLE, Grant, Principal, Privilege

_USERS = TableSpec(
    "auth_users",
    (
        FieldSpec("name", FieldType.STRING),
        FieldSpec("salt", FieldType.BYTES),
        FieldSpec("hash", FieldType.BYTES),
        FieldSpec("superuser", FieldType.INT),
        FieldSpec("created_ms", FieldType.LONG),
    ),
    primary_key=("name",),
)
_TOKENS = TableSpec(
    "auth_tokens",
    (
        FieldSpec("token_id", FieldType.STRING),
        FieldSpec("user", FieldType.STRING),
        FieldSpec("salt", FieldType.BYTES),
        FieldSpec("hash", FieldType.BYTES),
        FieldSpec("created_ms", FieldType.LONG),
        FieldSpec("expires_ms", FieldType.LONG),
        FieldSpec("revoked_ms", FieldType.LONG),
        FieldSpec("note", FieldType.STRING),
    ),
    primary_key=("token_id",),
    indexes=("user",),
)
_GRANTS = TableSpec(
    "auth_grants",
    (
        FieldSpec("user", FieldType.STRING),
        FieldSpec("database", FieldType.STRING),
        FieldSpec("table", FieldType.STRING),
        FieldSpec("privilege", FieldType.STRING),
    ),
    primary_key=("user", "database", "table"),
)

TOKEN_PREFIX = "gnm_"
_USER_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.@\-]{0,127}$")
_TOKEN = re.compile(r"^gnm_([0-9a-f]{16})\.([A-Za-z0-9_\-]{20,128})$")
#: scrypt's cost: n=2**14, r=8 takes 16 MiB (128 * n * r) per check.
_SCRYPT = {"n": 2**14, "r": 8, "p": 1, "maxmem": 64 * 1024**2, "dklen": 32}


def _hash(secret: str, salt: bytes) -> bytes:
    return hashlib.scrypt(secret.encode(), salt=salt, **_SCRYPT)


def _salted(secret: str) -> dict[str, bytes]:
    salt = secrets.token_bytes(16)
    return {"salt": salt, "hash": _hash(secret, salt)}


def _matches(secret: str, row: dict[str, Any]) -> bool:
    return hmac.compare_digest(_hash(secret, bytes(row["salt"])), bytes(row["hash"]))


def _now_ms() -> int:
    return int(time.time() * 1000)


def check_user_name(name: str) -> None:
    if not _USER_NAME.match(name):
        raise InvalidArgument(
            f"invalid user name {name!r}: up to 128 letters, digits, '_', '.', '@' or '-', "
            "starting with a letter, digit or '_'"
        )


def _check_password(password: str) -> None:
    if len(password) < 8:
        raise InvalidArgument("a password needs at least 8 characters")


@dataclass(frozen=True)
class User:
    name: str
    superuser: bool
    created_ms: int


@dataclass(frozen=True)
class Token:
    token_id: str
    user: str
    created_ms: int
    expires_ms: int | None
    revoked_ms: int | None
    note: str

    def state(self, now_ms: int) -> str:
        if self.revoked_ms is not None:
            return "revoked"
        if self.expires_ms is not None and self.expires_ms <= now_ms:
            return "expired"
        return "active"


@dataclass(frozen=True)
class IssuedToken:
    """A new token: ``secret`` is the whole token text, shown once and never stored."""

    token: Token
    secret: str


class Accounts:
    """The users, tokens and grants of one catalog store (its tables made on first use)."""

    def __init__(self, store: StructuredStore) -> None:
        self.store = store
        for spec in (_USERS, _TOKENS, _GRANTS):
            store.create(spec, if_not_exists=True)

    # -- users -----------------------------------------------------------------------------------

    def create_user(self, name: str, password: str, *, superuser: bool = False) -> User:
        check_user_name(name)
        _check_password(password)
        user = User(name, superuser, _now_ms())
        row = {"name": name, "superuser": int(superuser), "created_ms": user.created_ms}
        row.update(_salted(password))

        def txn(ctx: TableContext) -> None:
            users = ctx.table(_USERS.name)
            if users.read({"name": name}) is not None:
                raise AlreadyExists(f"user {name!r} already exists")
            users.write(row)

        run_with_retries(self.store, txn)
        return user

    def set_password(self, name: str, password: str) -> None:
        _check_password(password)
        salted = _salted(password)

        def txn(ctx: TableContext) -> None:
            users = ctx.table(_USERS.name)
            row = _user_row(users.read({"name": name}), name)
            users.write({**row, **salted})

        run_with_retries(self.store, txn)

    def drop_user(self, name: str) -> None:
        """Remove the user, its grants and its tokens."""

        def txn(ctx: TableContext) -> None:
            if not ctx.table(_USERS.name).delete({"name": name}):
                raise NotFound(f"user {name!r} does not exist")
            ctx.table(_GRANTS.name).delete_all({"user": name})
            tokens = ctx.table(_TOKENS.name)
            for row in list(tokens.scan_index("user", name, columns=["token_id"])):
                tokens.delete({"token_id": row["token_id"]})

        run_with_retries(self.store, txn)

    def users(self) -> list[User]:
        rows = self.store.transact(
            lambda ctx: list(
                ctx.table(_USERS.name).scan(columns=["name", "superuser", "created_ms"])
            )
        )
        return [User(r["name"], bool(r["superuser"]), int(r["created_ms"])) for r in rows]

    def any_users(self) -> bool:
        return bool(self.store.transact(lambda ctx: list(ctx.table(_USERS.name).scan(limit=1))))

    # -- grants ----------------------------------------------------------------------------------

    def grant(
        self, user: str, privilege: Privilege, table: str = EVERY_TABLE, database: str = DATABASE
    ) -> Grant:
        """Give ``user`` ``privilege`` on ``table`` (``*``: every table), replacing what it
        had there."""
        if database != DATABASE:
            raise InvalidArgument(f"unknown database {database!r}: gnomon has one, {DATABASE!r}")
        grant = Grant(user, database, table, privilege)

        def txn(ctx: TableContext) -> None:
            _user_row(ctx.table(_USERS.name).read({"name": user}), user)
            ctx.table(_GRANTS.name).write(
                {"user": user, "database": database, "table": table, "privilege": privilege.label}
            )

        run_with_retries(self.store, txn)
        return grant

    def revoke(self, user: str, table: str = EVERY_TABLE, database: str = DATABASE) -> None:
        key = {"user": user, "database": database, "table": table}
        if not self.store.transact(lambda ctx: ctx.table(_GRANTS.name).delete(key)):
            raise NotFound(f"user {user!r} has no grant on {database}.{table}")

    def grants(self, user: str | None = None) -> list[Grant]:
        prefix = None if user is None else KeyRange.prefix({"user": user})
        rows = self.store.transact(lambda ctx: list(ctx.table(_GRANTS.name).scan(prefix)))
        return [
            Grant(r["user"], r["database"], r["table"], Privilege.parse(r["privilege"]))
            for r in rows
        ]

    # -- tokens ----------------------------------------------------------------------------------

    def issue_token(self, user: str, *, ttl_s: float | None = None, note: str = "") -> IssuedToken:
        token_id = secrets.token_hex(8)
        secret = secrets.token_urlsafe(32)
        now = _now_ms()
        token = Token(
            token_id, user, now, None if ttl_s is None else now + int(ttl_s * 1000), None, note
        )
        row = {
            "token_id": token_id,
            "user": user,
            "created_ms": now,
            "expires_ms": token.expires_ms,
            "note": note,
            **_salted(secret),
        }

        def txn(ctx: TableContext) -> None:
            _user_row(ctx.table(_USERS.name).read({"name": user}), user)
            ctx.table(_TOKENS.name).write(row)

        run_with_retries(self.store, txn)
        return IssuedToken(token, f"{TOKEN_PREFIX}{token_id}.{secret}")

    def revoke_token(self, token_id: str) -> None:
        def txn(ctx: TableContext) -> None:
            tokens = ctx.table(_TOKENS.name)
            row = tokens.read({"token_id": token_id})
            if row is None:
                raise NotFound(f"token {token_id!r} does not exist")
            if row["revoked_ms"] is None:
                tokens.write({**row, "revoked_ms": _now_ms()})

        run_with_retries(self.store, txn)

    def tokens(self, user: str | None = None) -> list[Token]:
        def txn(ctx: TableContext) -> list[dict[str, Any]]:
            table = ctx.table(_TOKENS.name)
            rows = table.scan() if user is None else table.scan_index("user", user)
            return list(rows)

        return [_token(r) for r in self.store.transact(txn)]

    # -- checks ----------------------------------------------------------------------------------

    def check_password(self, name: str, password: str) -> Principal:
        """The user ``name`` with its grants; Unauthenticated (one message whatever was wrong,
        so it tells an attacker nothing) unless ``password`` is its password."""
        row, grants = self._user_and_grants(name)
        if row is None or not _matches(password, row):
            raise Unauthenticated("wrong user name or password")
        return Principal(name, bool(row["superuser"]), grants, via="password")

    def check_token(self, text: str) -> Principal:
        """The user a token ``text`` was issued to, with its grants; Unauthenticated if it is
        malformed, unknown, expired, revoked or its user was dropped."""
        m = _TOKEN.match(text)
        if m is None:
            raise Unauthenticated("malformed token: expected gnm_<id>.<secret>")
        token_id, secret = m.groups()
        row = self.store.transact(lambda ctx: ctx.table(_TOKENS.name).read({"token_id": token_id}))
        if row is None or not _matches(secret, row):
            raise Unauthenticated("unknown token")
        state = _token(row).state(_now_ms())
        if state != "active":
            raise Unauthenticated(f"token {token_id} is {state}")
        user, grants = self._user_and_grants(row["user"])
        if user is None:
            raise Unauthenticated(f"token {token_id}'s user no longer exists")
        return Principal(row["user"], bool(user["superuser"]), grants, via="token")

    def vouched(self, name: str, via: str = "cluster forward") -> Principal:
        """The user ``name`` with its grants, its credentials checked before (``via``: by
        another node of the cluster, which forwards its call; by this server, which issued
        it a session token); Unauthenticated if no such user exists."""
        row, grants = self._user_and_grants(name)
        if row is None:
            raise Unauthenticated(f"user {name!r} of the {via} does not exist")
        return Principal(name, bool(row["superuser"]), grants, via=via)

    def _user_and_grants(self, name: str) -> tuple[dict[str, Any] | None, tuple[Grant, ...]]:
        def txn(ctx: TableContext) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
            row = ctx.table(_USERS.name).read({"name": name})
            grants = list(ctx.table(_GRANTS.name).scan(KeyRange.prefix({"user": name})))
            return row, grants

        row, grants = self.store.transact(txn)
        return row, tuple(
            Grant(g["user"], g["database"], g["table"], Privilege.parse(g["privilege"]))
            for g in grants
        )


def _user_row(row: dict[str, Any] | None, name: str) -> dict[str, Any]:
    if row is None:
        raise NotFound(f"user {name!r} does not exist")
    return row


def _token(row: dict[str, Any]) -> Token:
    return Token(
        row["token_id"],
        row["user"],
        int(row["created_ms"]),
        row["expires_ms"],
        row["revoked_ms"],
        row["note"] or "",
    )
