"""The JSON forms exchanged with a node's Arrow Flight endpoint, shared by the server
(``node/server/flight.py``) and its clients (the Spark data source): scan requests (in
``get_flight_info`` descriptors and ``do_get`` tickets), filters, ``do_put`` descriptors and the
bodies of actions.

A filter is ``[column, op, value]``; a list of them is their AND. ``op`` is one of
``=, !=, <, <=, >, >=`` (value: a JSON scalar), ``in`` (value: a list of them), ``is_null`` and
``is_not_null`` (no value). Timestamps are integer milliseconds since the epoch, dates
``YYYY-MM-DD`` strings.

Every form is a dataclass whose field types carry their constraints; what arrives on the wire
is checked against them by pydantic (:func:`parse`), field by field, unknown fields refused, so
a bad request is an InvalidArgument naming the field, never a failure deeper in the server.
Forms built in Python are trusted and not checked again.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
)

from gnomon.errors import InvalidArgument

COMPARISONS = ("=", "!=", "<", "<=", ">", ">=")
OPS = (*COMPARISONS, "in", "is_null", "is_not_null")

Filter = tuple[str, str, Any]

#: An integer the engine stores in 64 bits (milliseconds, versions, row counts).
Int64 = Annotated[StrictInt, Field(ge=-(2**63), le=2**63 - 1)]
Positive = Annotated[StrictInt, Field(ge=1, le=2**63 - 1)]
Name = Annotated[StrictStr, Field(min_length=1, max_length=1024)]
#: The longest revision lease a client may ask for (it renews it with ``heartbeat``).
MAX_LEASE_MS = 24 * 3600 * 1000
#: The longest a ``commit`` may wait for its revision to be published.
MAX_COMMIT_WAIT_S = 3600.0
#: A job's task attempt staging rows under a revision (a Spark write makes a uuid per attempt).
Attempt = Annotated[StrictStr, Field(min_length=1, max_length=128)]
#: The most attempts one ``commit`` may name (one per task of the job that wrote the table).
MAX_ATTEMPTS = 1_000_000
#: The longest encoded row predicate a scan request carries (base64 characters).
MAX_PREDICATE_CHARS = 4 * 1024**2
#: JSON scalars a filter compares with.
_SCALARS = (str, int, float, bool)


def check_filter(f: Any) -> Filter:
    if not isinstance(f, list | tuple) or len(f) not in (2, 3) or not isinstance(f[0], str):
        raise InvalidArgument(f"invalid filter {f!r}: expected [column, op, value]")
    column, op = f[0], f[1]
    value = f[2] if len(f) == 3 else None
    if op not in OPS:
        raise InvalidArgument(f"invalid filter op {op!r} on {column!r}; expected one of {OPS}")
    if op in COMPARISONS and not isinstance(value, _SCALARS):
        raise InvalidArgument(
            f"filter {column!r} {op}: value must be a string, number or boolean, got {value!r}"
        )
    if op == "in":
        if not isinstance(value, list | tuple) or not all(
            v is None or isinstance(v, _SCALARS) for v in value
        ):
            raise InvalidArgument(
                f"filter {column!r} in: value must be a list of scalars, got {value!r}"
            )
        value = list(value)
    if op in ("is_null", "is_not_null") and value is not None:
        raise InvalidArgument(f"filter {column!r} {op}: takes no value, got {value!r}")
    return (column, op, value)


def _filters(v: Any) -> list[Filter]:
    if v is None:
        return []
    if not isinstance(v, list):
        raise ValueError("must be a list of [column, op, value]")
    try:
        return [check_filter(f) for f in v]
    except InvalidArgument as e:
        # A ValueError is what pydantic reports as this field's problem.
        raise ValueError(e.message) from None


def _open_if_null(v: Any) -> Any:
    return (None, None) if v is None else v


def _ordered(v: tuple[int | None, int | None]) -> tuple[int | None, int | None]:
    lo, hi = v
    if lo is not None and hi is not None and lo > hi:
        raise ValueError(f"lower bound {lo} is above upper bound {hi}")
    return v


#: ``[lo, hi)`` in ms, either bound null (or the whole range null) for open.
TimeRange = Annotated[
    tuple[Int64 | None, Int64 | None], BeforeValidator(_open_if_null), AfterValidator(_ordered)
]


_FORBID = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class ScanSpec:
    """What to read: a table, its columns (None: all), filters, a [lo, hi) ms time range and
    a manifest version (or the version current at ``timestamp_ms``; neither: the live table).
    ``scan_id`` names the scan for ``scan_stats``. It is the wire form of a node's scan
    request (``node/engine/scan/wire.py``): the node prunes files, row groups and series by
    the filters' comparisons and value lists as by a local scan's bounds.

    Planned with ``lease_ms``, the snapshot is held (the live table: its manifest version and
    memtables as they are, nothing flushed) for that long after each use, and the tickets
    name it in ``pin``; with ``native`` too (URI schemes the reader can open, ``file``,
    ``s3a``), SSTs that need no merge and that it can open are left out of the tickets and
    listed in the plan for the reader to read as plain Parquet."""

    __pydantic_config__: ClassVar[ConfigDict] = _FORBID

    table: Name
    columns: list[Name] | None = None
    filters: Annotated[list[Filter], BeforeValidator(_filters)] = field(default_factory=list)
    #: A row predicate ANDed with ``filters``: a Substrait ExtendedExpression, base64, as
    #: ``node.engine.scan.wire.encode_predicate`` makes it (what a node's SQL engine pushes
    #: to the owner of a table it reads remotely).
    predicate: Annotated[StrictStr, Field(min_length=1, max_length=MAX_PREDICATE_CHARS)] | None = (
        None
    )
    time_range: TimeRange = (None, None)
    version: Annotated[StrictInt, Field(ge=0, le=2**63 - 1)] | None = None
    timestamp_ms: Int64 | None = None
    scan_id: Name | None = None
    #: get_flight_info only: at most this many time splits, of about this many rows at least.
    max_splits: Annotated[StrictInt, Field(ge=1, le=100_000)] = 64
    min_split_rows: Positive = 1_000_000
    lease_ms: Annotated[StrictInt, Field(ge=1, le=MAX_LEASE_MS)] | None = None
    native: list[Annotated[StrictStr, Field(pattern="^[a-z0-9]{1,16}$")]] = field(
        default_factory=list
    )
    pin: Name | None = None

    def __post_init__(self) -> None:
        if self.columns is not None and len(set(self.columns)) != len(self.columns):
            twice = sorted({c for c in self.columns if self.columns.count(c) > 1})
            raise ValueError(f"columns named more than once: {', '.join(twice)}")
        if self.native and self.lease_ms is None:
            raise ValueError("native files are planned only for a held snapshot (lease_ms)")
        if self.pin is not None and (self.version is not None or self.timestamp_ms is not None):
            raise ValueError("a ticket of a held snapshot names no version or timestamp")

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> ScanSpec:
        return parse(cls, raw, "scan request")


#: Longest query a :class:`QuerySpec` carries.
MAX_QUERY_CHARS = 1024**2
#: The most tables a :class:`QuerySpec` reads as one (a partition table's sub-tables).
MAX_UNION_TABLES = 1024


@dataclass(frozen=True)
class QuerySpec:
    """A ``do_get`` answering a SQL query over tables the node serves (the share of the
    sub-tables it serves in a partition table's query, read as one with ``unions``): a
    table served elsewhere fails it as "not owner", it is never sent on."""

    __pydantic_config__: ClassVar[ConfigDict] = _FORBID

    query: Annotated[StrictStr, Field(min_length=1, max_length=MAX_QUERY_CHARS)]
    #: Tables the query names that read the rows of several served there (sub-tables
    #: answering one partial query together), each among its own.
    unions: Annotated[
        dict[Name, Annotated[list[Name], Field(min_length=1, max_length=MAX_UNION_TABLES)]],
        Field(max_length=MAX_UNION_TABLES),
    ] = field(default_factory=dict)

    def to_json(self) -> bytes:
        # Without unions as before them: a node that knows none still answers.
        doc = asdict(self)
        if not self.unions:
            del doc["unions"]
        return json.dumps(doc).encode()


def read_ticket(raw: bytes) -> ScanSpec | QuerySpec:
    """A ``do_get`` ticket: a query when it carries one, else a scan."""
    try:
        doc = json.loads(raw or b"{}")
    except (ValueError, RecursionError):
        doc = None
    if isinstance(doc, dict) and "query" in doc:
        return parse(QuerySpec, raw, "query ticket")
    return ScanSpec.from_json(raw)


@dataclass(frozen=True)
class PutSpec:
    """A ``do_put``: rows for ``table``, written visibly, or staged under ``revision`` (by
    task attempt ``attempt``, when a job's commit names the attempts that count); or,
    with ``ingest``, rows written like a line-protocol request (the table created and
    columns added as they need, ``node/cluster/rows_wire.py`` their form). A node that
    sends such a write on to the table's owner names itself in ``forwarded_from``: the
    owner writes it or refuses it, never sends it on."""

    __pydantic_config__: ClassVar[ConfigDict] = _FORBID

    table: Name
    revision: Positive | None = None
    attempt: Attempt | None = None
    ingest: StrictBool = False
    forwarded_from: Name | None = None

    def __post_init__(self) -> None:
        if self.ingest and self.revision is not None:
            raise ValueError("ingest writes rows at once; it takes no revision")
        if self.attempt is not None and self.revision is None:
            raise ValueError("attempt is for puts staged under a revision only")
        if self.forwarded_from is not None and not self.ingest:
            raise ValueError("forwarded_from is for ingest puts only")

    def to_json(self) -> bytes:
        doc = asdict(self)
        # Left out at their defaults: a plain put's descriptor is what it always was.
        for key, default in (("attempt", None), ("ingest", False), ("forwarded_from", None)):
            if doc[key] == default:
                del doc[key]
        return json.dumps(doc).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> PutSpec:
        return parse(cls, raw, "put descriptor")


# -- action bodies -------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableArgs:
    """``describe`` and ``route``."""

    __pydantic_config__: ClassVar[ConfigDict] = _FORBID

    table: Name


@dataclass(frozen=True)
class ReserveArgs:
    """``reserve``: a new revision; ``time_range`` bounds an overwrite."""

    __pydantic_config__: ClassVar[ConfigDict] = _FORBID

    table: Name
    mode: Literal["append", "overwrite"] = "append"
    time_range: TimeRange = (None, None)
    lease_ms: Annotated[StrictInt, Field(ge=1, le=MAX_LEASE_MS)] = 600_000
    owner: Annotated[StrictStr, Field(max_length=1024)] = ""


@dataclass(frozen=True)
class RevisionArgs:
    """``abort`` and ``heartbeat``."""

    __pydantic_config__: ClassVar[ConfigDict] = _FORBID

    table: Name
    revision: Positive


@dataclass(frozen=True)
class CommitArgs:
    """``commit``; with ``attempts``, only the rows those task attempts staged are published
    (none named: everything staged)."""

    __pydantic_config__: ClassVar[ConfigDict] = _FORBID

    table: Name
    revision: Positive
    wait_s: Annotated[StrictFloat, Field(ge=0.0, le=MAX_COMMIT_WAIT_S, allow_inf_nan=False)] = 0.0
    attempts: Annotated[list[Attempt], Field(max_length=MAX_ATTEMPTS)] | None = None


@dataclass(frozen=True)
class PinArgs:
    """``renew`` and ``release`` of a held snapshot."""

    __pydantic_config__: ClassVar[ConfigDict] = _FORBID

    pin: Name


@dataclass(frozen=True)
class ScanStatsArgs:
    __pydantic_config__: ClassVar[ConfigDict] = _FORBID

    scan_id: Name


#: The body each action takes.
ACTIONS: dict[str, type] = {
    "describe": TableArgs,
    "reserve": ReserveArgs,
    "commit": CommitArgs,
    "abort": RevisionArgs,
    "heartbeat": RevisionArgs,
    "scan_stats": ScanStatsArgs,
    "renew": PinArgs,
    "release": PinArgs,
    "route": TableArgs,
}


def parse_action(kind: str, body: bytes) -> Any:
    """The body of action ``kind``, checked; InvalidArgument for an unknown action."""
    form = ACTIONS.get(kind)
    if form is None:
        raise InvalidArgument(f"unknown action {kind!r}; known: {', '.join(ACTIONS)}")
    return parse(form, body, f"action {kind!r}")


# -- checking ------------------------------------------------------------------------------------

F = TypeVar("F")
_ADAPTERS: dict[type, TypeAdapter[Any]] = {}


def parse(form: type[F], raw: bytes, what: str) -> F:
    """``raw`` (JSON; empty is ``{}``) as a ``form``, every field checked; InvalidArgument
    naming ``what`` and each bad field otherwise."""
    try:
        doc = json.loads(raw or b"{}")
    except ValueError as e:
        raise InvalidArgument(f"{what} is not JSON: {e}") from None
    except RecursionError:
        raise InvalidArgument(f"{what} is not valid JSON: nested too deeply") from None
    if not isinstance(doc, dict):
        raise InvalidArgument(f"{what} must be a JSON object")
    adapter = _ADAPTERS.get(form)
    if adapter is None:
        adapter = _ADAPTERS[form] = TypeAdapter(form)
    try:
        value: F = adapter.validate_python(doc)
    except ValidationError as e:
        raise InvalidArgument(f"{what}: {_problems(e)}") from None
    return value


def _problems(e: ValidationError) -> str:
    out = []
    for err in e.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "body"
        if err["type"] == "missing":
            out.append(f"{where}: required")
        elif err["type"] == "unexpected_keyword_argument":
            out.append(f"{where}: unknown field")
        else:
            message = err["msg"].removeprefix("Value error, ")
            given = repr(err.get("input"))
            given = given if len(given) <= 60 else given[:57] + "..."
            out.append(f"{where}: {message} (got {given})")
    return "; ".join(out)
