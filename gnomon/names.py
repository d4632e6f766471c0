"""Table names: the one rule every path checks before anything is recorded (SQL, line
protocol, gRPC, Flight and Spark writes through the engine; the meta service for every node),
and the names of a partition table's sub-tables."""

from __future__ import annotations

import re

from gnomon.errors import InvalidArgument

# A name may start with a digit, as HoraeDB's may (``03_dml_select``), but not be a number.
_TABLE_NAME = re.compile(r"^(?![0-9]*$)[A-Za-z0-9_][A-Za-z0-9_\-\.]{0,254}$")

#: What starts the names of sub-tables, which only the meta service makes.
SUB_TABLE_PREFIX = "__"


def check_table_name(name: str) -> None:
    """InvalidArgument naming the rule unless ``name`` is a valid table name."""
    if not _TABLE_NAME.match(name):
        shown = name if len(name) <= 64 else f"{name[:64]}... ({len(name)} characters)"
        raise InvalidArgument(
            f"invalid table name {shown!r}: up to 255 letters, digits, '_', '-' or '.', "
            "starting with a letter, digit or '_', not all digits"
        )


def check_new_table_name(name: str, partitions: int = 0) -> None:
    """:func:`check_table_name` for a table a user creates: not a sub-table's name, and with
    ``partitions``, sub-table names that are valid too."""
    check_table_name(name)
    if name.startswith(SUB_TABLE_PREFIX):
        raise InvalidArgument(
            f"invalid table name {name!r}: names starting with {SUB_TABLE_PREFIX!r} are "
            "reserved for partition tables' sub-tables"
        )
    if partitions:
        check_table_name(partition_name(name, partitions - 1))


def partition_name(parent: str, index: int) -> str:
    """The name of a partition table's ``index``-th sub-table."""
    return f"{SUB_TABLE_PREFIX}{parent}_{index}"
