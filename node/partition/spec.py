"""A partition table's definition: its schema and options (those of every sub-table), the key
rule and the sub-tables' names."""

from __future__ import annotations

import json
from dataclasses import dataclass

from gnomon.errors import Corrupted
from gnomon.names import partition_name
from node.engine.catalog import TableInfo
from node.engine.options import TableOptions
from node.engine.schema import Schema
from node.partition.rule import KeyRule


@dataclass(frozen=True)
class PartitionSpec:
    name: str
    schema: Schema
    options: TableOptions
    rule: KeyRule
    #: The meta service's id of the table (0 on a standalone server, which gives it none).
    table_id: int = 0
    created_ms: int = 0

    def sub_table(self, index: int) -> str:
        """The name of sub-table ``index`` (the meta service's naming, standalone too)."""
        return partition_name(self.name, index)

    @property
    def sub_tables(self) -> list[str]:
        return [self.sub_table(i) for i in range(self.rule.partitions)]

    def info(self) -> TableInfo:
        """The partition table as the catalog describes a table."""
        return TableInfo(self.table_id, self.name, self.schema, self.options, self.created_ms)

    def clause(self) -> str:
        """Its ``PARTITION BY`` clause, as CREATE TABLE takes it."""
        key = ", ".join("`" + c.replace("`", "``") + "`" for c in self.rule.columns)
        return f"PARTITION BY KEY({key}) PARTITIONS {self.rule.partitions}"

    def to_json(self) -> bytes:
        """Its definition; the ``schema`` and ``options`` keys are those of a plain table's
        definition at the meta service (``node.cluster.tables``), so the sub-tables, which
        carry the same bytes, decode as plain tables."""
        return json.dumps(
            {
                "schema": self.schema.to_json(),
                "options": self.options.to_json(),
                "partition_key": list(self.rule.columns),
                "partitions": self.rule.partitions,
            }
        ).encode()

    @classmethod
    def from_json(
        cls, name: str, data: bytes, *, table_id: int = 0, created_ms: int = 0
    ) -> PartitionSpec:
        try:
            doc = json.loads(data)
            return cls(
                name,
                Schema.from_json(doc["schema"]),
                TableOptions.from_json(doc["options"]),
                KeyRule(tuple(doc["partition_key"]), int(doc["partitions"])),
                table_id,
                created_ms,
            )
        except (ValueError, KeyError, TypeError) as e:
            raise Corrupted(
                f"partition table {name!r}: its definition does not decode: {e}"
            ) from None
