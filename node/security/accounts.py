"""Users, API tokens and grants, kept in the catalog through the StructuredTable SPI (the
standalone's SQLite file, a cluster's etcd or PostgreSQL), so every node of a cluster sees the
same accounts.

Passwords and token secrets are stored only as salted scrypt hashes (``hashlib.scrypt``,
n=2**14, r=8, p=1: about 16 MiB and tens of milliseconds per check, which is what makes a
stolen table slow to attack; the authenticator caches successful checks briefly so a busy
client does not pay it per request). A token reads ``gnm_<id>.<secret>``: the id finds its
row, the secret is checked against the row's hash. Tokens expire (optionally) and are revoked
by marking their row, which stays for the audit trail.

Setting a password also keeps its SCRAM-SHA-256 verifier (:mod:`node.security.scram`), which
the PostgreSQL protocol checks without the password crossing the connection. It is a record
of its own (``auth_scram``, signed as the others): the catalog's tables cannot gain a field
(an existing table of another spec is refused), and a catalog from before verifiers were
kept gains the table empty. A verifier names the salt of the scrypt hash made from the same
password, so one left behind by a password set without it (by a gnomon that kept none) is
not believed: such an account, until its password is set again, has no verifier.

With a cluster secret, every record is signed as it is written and checked as it is read
(:mod:`node.security.signatures`): one edited outside gnomon, or made before records were
signed, is refused and logged once, until ``gnomon admin users sign`` signs it again. Without
one (a standalone that has none) records are neither signed nor checked: its catalog, and any
key it could keep, lie in the same data directory, so a signature would stop nobody who can
edit them.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import logging
import re
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gnomon.errors import AlreadyExists, Corrupted, InvalidArgument, NotFound, Unauthenticated
from gnomon.store.api import KeyRange, StructuredStore, TableContext, run_with_retries
from gnomon.store.spec import FieldSpec, FieldType, TableSpec
from node.security import scram
from node.security.principal import DATABASE, EVERY_TABLE, Grant, Principal, Privilege
from node.security.signatures import SIGNATURES, RecordSigner

log = logging.getLogger("gnomon.security")

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
_SCRAM = TableSpec(
    "auth_scram",
    (
        FieldSpec("name", FieldType.STRING),
        #: The salt of the user record's scrypt hash of the same password.
        FieldSpec("password_salt", FieldType.BYTES),
        FieldSpec("salt", FieldType.BYTES),
        FieldSpec("iterations", FieldType.INT),
        FieldSpec("stored_key", FieldType.BYTES),
        FieldSpec("server_key", FieldType.BYTES),
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

#: How an operator signs records again (after an upgrade, or a new cluster secret).
RESIGN = "gnomon admin users sign"
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


def _password_rows(name: str, password: str) -> tuple[dict[str, bytes], dict[str, Any]]:
    """The fields a password sets in a user record, and its SCRAM verifier record."""
    salted = _salted(password)
    verifier = scram.verifier(password)
    return salted, {
        "name": name,
        "password_salt": salted["salt"],
        "salt": verifier.salt,
        "iterations": verifier.iterations,
        "stored_key": verifier.stored_key,
        "server_key": verifier.server_key,
    }


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
    """The users, tokens and grants of one catalog store (its tables made on first use),
    signed and checked under ``cluster_secret`` (None: neither)."""

    def __init__(self, store: StructuredStore, *, cluster_secret: str | None = None) -> None:
        self.store = store
        self._signer = RecordSigner(cluster_secret) if cluster_secret else None
        #: Refused records already logged (their signature keys): each is logged once.
        self._warned: set[tuple[str, str, str]] = set()
        self._warned_lock = threading.Lock()
        for spec in (_USERS, _SCRAM, _TOKENS, _GRANTS, SIGNATURES):
            store.create(spec, if_not_exists=True)

    # -- users -----------------------------------------------------------------------------------

    def create_user(self, name: str, password: str, *, superuser: bool = False) -> User:
        check_user_name(name)
        _check_password(password)
        user = User(name, superuser, _now_ms())
        salted, verifier = _password_rows(name, password)
        row = {"name": name, "superuser": int(superuser), "created_ms": user.created_ms, **salted}

        def txn(ctx: TableContext) -> None:
            if ctx.table(_USERS.name).read({"name": name}) is not None:
                raise AlreadyExists(f"user {name!r} already exists")
            self._write(ctx, _USERS, row)
            self._write(ctx, _SCRAM, verifier)

        run_with_retries(self.store, txn)
        return user

    def set_password(self, name: str, password: str) -> None:
        _check_password(password)
        salted, verifier = _password_rows(name, password)

        def txn(ctx: TableContext) -> None:
            row = _user_row(ctx.table(_USERS.name).read({"name": name}), name)
            # The rest of the record is written again, signed: it must be what was signed.
            if not self._trusted(_USERS, row, self._macs(ctx, name)):
                raise Corrupted(
                    f"{_describe(_USERS, row)} fails its signature check: review it and sign "
                    f"it again ({RESIGN} --dry-run, then {RESIGN}), or drop and create the user"
                )
            self._write(ctx, _USERS, {**row, **salted})
            self._write(ctx, _SCRAM, verifier)

        run_with_retries(self.store, txn)

    def drop_user(self, name: str) -> None:
        """Remove the user, its grants and its tokens."""

        def txn(ctx: TableContext) -> None:
            if not ctx.table(_USERS.name).delete({"name": name}):
                raise NotFound(f"user {name!r} does not exist")
            ctx.table(_SCRAM.name).delete({"name": name})
            ctx.table(_GRANTS.name).delete_all({"user": name})
            tokens = ctx.table(_TOKENS.name)
            for row in list(tokens.scan_index("user", name, columns=["token_id"])):
                tokens.delete({"token_id": row["token_id"]})
            ctx.table(SIGNATURES.name).delete_all({"user": name})

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
            self._write(
                ctx,
                _GRANTS,
                {"user": user, "database": database, "table": table, "privilege": privilege.label},
            )

        run_with_retries(self.store, txn)
        return grant

    def revoke(self, user: str, table: str = EVERY_TABLE, database: str = DATABASE) -> None:
        key = {"user": user, "database": database, "table": table}

        def txn(ctx: TableContext) -> bool:
            ctx.table(SIGNATURES.name).delete(_signature_key(_GRANTS, key))
            return ctx.table(_GRANTS.name).delete(key)

        if not self.store.transact(txn):
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
            self._write(ctx, _TOKENS, row)

        run_with_retries(self.store, txn)
        return IssuedToken(token, f"{TOKEN_PREFIX}{token_id}.{secret}")

    def revoke_token(self, token_id: str) -> None:
        def txn(ctx: TableContext) -> None:
            row = ctx.table(_TOKENS.name).read({"token_id": token_id})
            if row is None:
                raise NotFound(f"token {token_id!r} does not exist")
            # Signed even if it failed its check: a revoked token is refused whatever it says.
            if row["revoked_ms"] is None:
                self._write(ctx, _TOKENS, {**row, "revoked_ms": _now_ms()})

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

    def scram_verifier(self, name: str) -> scram.Verifier | None:
        """User ``name``'s SCRAM-SHA-256 verifier; None if it has none believed (its password
        was set before verifiers were kept). Unauthenticated (as :meth:`check_password` words
        it) if there is no such user."""

        def txn(ctx: TableContext) -> tuple[_Records, dict[str, Any] | None]:
            return self._records(ctx, name), ctx.table(_SCRAM.name).read({"name": name})

        records, row = self.store.transact(txn)
        if records.user is None:
            raise Unauthenticated("wrong user name or password")
        if (
            row is None
            or not self._trusted(_SCRAM, row, records.macs)
            or bytes(row["password_salt"]) != bytes(records.user["salt"])
        ):
            return None
        return scram.Verifier(
            bytes(row["salt"]),
            int(row["iterations"]),
            bytes(row["stored_key"]),
            bytes(row["server_key"]),
        )

    def check_token(self, text: str) -> Principal:
        """The user a token ``text`` was issued to, with its grants; Unauthenticated if it is
        malformed, unknown, expired, revoked or its user was dropped."""
        m = _TOKEN.match(text)
        if m is None:
            raise Unauthenticated("malformed token: expected gnm_<id>.<secret>")
        token_id, secret = m.groups()

        def txn(ctx: TableContext) -> tuple[dict[str, Any], _Records] | None:
            row = ctx.table(_TOKENS.name).read({"token_id": token_id})
            return None if row is None else (row, self._records(ctx, row["user"]))

        found = self.store.transact(txn)
        if found is None:
            raise Unauthenticated("unknown token")
        row, records = found
        if not self._trusted(_TOKENS, row, records.macs) or not _matches(secret, row):
            raise Unauthenticated("unknown token")
        state = _token(row).state(_now_ms())
        if state != "active":
            raise Unauthenticated(f"token {token_id} is {state}")
        if records.user is None:
            raise Unauthenticated(f"token {token_id}'s user no longer exists")
        return Principal(row["user"], bool(records.user["superuser"]), records.grants, via="token")

    def vouched(self, name: str, via: str = "cluster forward") -> Principal:
        """The user ``name`` with its grants, its credentials checked before (``via``: by
        another node of the cluster, which forwards its call; by this server, which issued
        it a session token); Unauthenticated if no such user exists."""
        row, grants = self._user_and_grants(name)
        if row is None:
            raise Unauthenticated(f"user {name!r} of the {via} does not exist")
        return Principal(name, bool(row["superuser"]), grants, via=via)

    def _user_and_grants(self, name: str) -> tuple[dict[str, Any] | None, tuple[Grant, ...]]:
        records = self.store.transact(lambda ctx: self._records(ctx, name))
        return records.user, records.grants

    # -- signatures ------------------------------------------------------------------------------

    def sign(self, *, dry_run: bool = False) -> list[str]:
        """Sign every record whose signature does not verify (``dry_run``: only name them):
        records made before records were signed, under another cluster secret, or edited
        outside gnomon, which is why whoever runs this reviews them first. What it signed
        (or would sign), described."""
        signer = self._signer
        if signer is None:
            raise InvalidArgument(
                "signing account records needs the cluster secret (GNOMON_CLUSTER_SECRET)"
            )

        def unsigned(ctx: TableContext) -> list[tuple[TableSpec, dict[str, Any]]]:
            macs = self._macs(ctx)
            return [
                (spec, row)
                for spec in (_USERS, _SCRAM, _TOKENS, _GRANTS)
                for row in ctx.table(spec.name).scan()
                if not signer.verifies(spec, row, macs.get(_signature_id(spec, row)))
            ]

        found = self.store.transact(unsigned)
        if not dry_run:
            # One record a transaction: however many there are, none is too large for etcd.
            for spec, row in found:
                key = {k: row[k] for k in spec.primary_key}
                run_with_retries(
                    self.store, functools.partial(self._sign_again, spec=spec, key=key)
                )
        return [_describe(spec, row) for spec, row in found]

    def _sign_again(self, ctx: TableContext, spec: TableSpec, key: Mapping[str, Any]) -> None:
        row = ctx.table(spec.name).read(key)
        if row is not None:
            self._write(ctx, spec, row)

    def _write(self, ctx: TableContext, spec: TableSpec, row: Mapping[str, Any]) -> None:
        """Write a record, and its signature with a secret."""
        ctx.table(spec.name).write(row)
        if self._signer is not None:
            signature = {**_signature_key(spec, row), "mac": self._signer.mac(spec, row)}
            ctx.table(SIGNATURES.name).write(signature)

    def _macs(
        self, ctx: TableContext, user: str | None = None
    ) -> dict[tuple[str, str, str], bytes]:
        """The signatures of ``user``'s records, or of all (none read without a secret)."""
        if self._signer is None:
            return {}
        prefix = None if user is None else KeyRange.prefix({"user": user})
        rows = ctx.table(SIGNATURES.name).scan(prefix)
        return {(r["user"], r["kind"], r["item"]): r["mac"] for r in rows}

    def _records(self, ctx: TableContext, name: str) -> _Records:
        """User ``name``'s record and grants, those that fail their check left out."""
        macs = self._macs(ctx, name)
        row = ctx.table(_USERS.name).read({"name": name})
        grants = ctx.table(_GRANTS.name).scan(KeyRange.prefix({"user": name}))
        return _Records(
            row if row is not None and self._trusted(_USERS, row, macs) else None,
            tuple(
                Grant(g["user"], g["database"], g["table"], Privilege.parse(g["privilege"]))
                for g in grants
                if self._trusted(_GRANTS, g, macs)
            ),
            macs,
        )

    def _trusted(
        self, spec: TableSpec, row: Mapping[str, Any], macs: Mapping[tuple[str, str, str], bytes]
    ) -> bool:
        """Whether a record read may be believed: no secret, or its signature verifies. A
        record refused is logged, once."""
        signer = self._signer
        if signer is None:
            return True
        ident = _signature_id(spec, row)
        if signer.verifies(spec, row, macs.get(ident)):
            return True
        with self._warned_lock:
            first = ident not in self._warned
            self._warned.add(ident)
        if first:
            log.warning(
                "an account record fails its signature check and is refused: it was changed "
                "outside gnomon, or made before records were signed or under another cluster "
                f"secret; review it and sign it again ({RESIGN})",
                extra={"record": _describe(spec, row)},
            )
        return False


@dataclass(frozen=True)
class _Records:
    """A user's record (None: none, or refused) and grants as a check reads them, and the
    signatures read with them."""

    user: dict[str, Any] | None
    grants: tuple[Grant, ...]
    macs: dict[tuple[str, str, str], bytes]


def _signature_key(spec: TableSpec, row: Mapping[str, Any]) -> dict[str, str]:
    """The key of a record's signature row: its user, its table, the rest of its key."""
    if spec is _USERS or spec is _SCRAM:
        return {"user": row["name"], "kind": spec.name, "item": ""}
    if spec is _TOKENS:
        return {"user": row["user"], "kind": spec.name, "item": row["token_id"]}
    return {
        "user": row["user"],
        "kind": spec.name,
        "item": json.dumps([row["database"], row["table"]]),
    }


def _signature_id(spec: TableSpec, row: Mapping[str, Any]) -> tuple[str, str, str]:
    key = _signature_key(spec, row)
    return key["user"], key["kind"], key["item"]


def _describe(spec: TableSpec, row: Mapping[str, Any]) -> str:
    if spec is _USERS:
        return f"user {row['name']!r}"
    if spec is _SCRAM:
        return f"SCRAM verifier of user {row['name']!r}"
    if spec is _TOKENS:
        return f"token {row['token_id']} of user {row['user']!r}"
    return f"grant of {row['privilege']} on {row['database']}.{row['table']} to {row['user']!r}"


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
