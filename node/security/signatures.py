"""Signatures of account records: what makes an edit made straight in the catalog store (etcd,
PostgreSQL, the SQLite file) show, instead of taking effect.

Each user, token and grant record has a signature row beside it: HMAC-SHA256 over the
record's table and every field of it (its key among them), under a key derived from the
cluster secret. A record whose signature is missing or does not match is refused where it is
read: the user cannot authenticate, the token is unknown, the grant is ignored. Whoever can
write to the store but does not hold the cluster secret can delete records, but not make or
change one that is believed. A record put back as it once was (a grant revoked since, a
token from before its revocation) carries a signature that matched once: signatures do not
stop that, etcd's own authentication is what keeps writers out of the store.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

from gnomon.store.spec import FieldSpec, FieldType, TableSpec

#: Keeps the key derived from the cluster secret apart from its other uses.
_KEY_CONTEXT = b"gnomon account records v1"

#: One row per signed record: its user, the record's table and the rest of its key (empty
#: for the user record itself), so a user's signatures are one key prefix.
SIGNATURES = TableSpec(
    "auth_signatures",
    (
        FieldSpec("user", FieldType.STRING),
        FieldSpec("kind", FieldType.STRING),
        FieldSpec("item", FieldType.STRING),
        FieldSpec("mac", FieldType.BYTES),
    ),
    primary_key=("user", "kind", "item"),
)


class RecordSigner:
    """Signs and checks account records under the key of one cluster secret."""

    def __init__(self, cluster_secret: str) -> None:
        self._key = hmac.new(cluster_secret.encode(), _KEY_CONTEXT, hashlib.sha256).digest()

    def mac(self, spec: TableSpec, row: Mapping[str, Any]) -> bytes:
        return hmac.new(self._key, _canonical(spec, row), hashlib.sha256).digest()

    def verifies(self, spec: TableSpec, row: Mapping[str, Any], mac: bytes | None) -> bool:
        return mac is not None and hmac.compare_digest(self.mac(spec, row), bytes(mac))


def _canonical(spec: TableSpec, row: Mapping[str, Any]) -> bytes:
    """The bytes a record's signature covers: its table, and each field's name and value in
    the spec's order (bytes as hex; a field not given is null, as the store reads it back)."""
    values = [[f.name, _plain(f, row.get(f.name))] for f in spec.fields]
    return json.dumps([spec.name, values], separators=(",", ":")).encode()


def _plain(field: FieldSpec, value: Any) -> Any:
    if value is None or field.type is not FieldType.BYTES:
        return value
    return bytes(value).hex()
