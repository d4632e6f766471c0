"""A table's definition as the meta service keeps it: the bytes of its ``schema`` field are
the JSON of the engine's schema and options, so any node can (re)create the catalog entry of
a table the meta service placed, whoever created it."""

from __future__ import annotations

import json

from gnomon.errors import Corrupted
from node.engine.options import TableOptions
from node.engine.schema import Schema


def encode(schema: Schema, options: TableOptions) -> bytes:
    return json.dumps({"schema": schema.to_json(), "options": options.to_json()}).encode()


def decode(name: str, data: bytes) -> tuple[Schema, TableOptions]:
    try:
        doc = json.loads(data)
        return Schema.from_json(doc["schema"]), TableOptions.from_json(doc["options"])
    except (ValueError, KeyError, TypeError) as e:
        raise Corrupted(
            f"table {name!r}: the meta service's definition does not decode: {e}"
        ) from None
