"""Planning a read of a table on every node that serves part of it, without
pyspark: the Spark reader and the hybrid read build on it.

The node asked first answers where the table (or each sub-table of a partition table) is
served (the ``route`` action); each owner then plans its share at once, in parallel: it holds
its snapshot under a lease and answers tickets (one per time split) to redeem at it, and, when
asked, the SSTs it left out of them for the reader to read as plain Parquet. The plan carries
the held snapshots' ids so the reader can renew and release them (:class:`LeaseKeeper`).

A read allowing follower reads plans each part at one of its followers instead (where it has
some; its tickets are redeemed there, a moment behind the leader), and holds the same manifest
version at the leader too: the leader's garbage collection, which deletes the files, knows
only its own leases.
"""

from __future__ import annotations

import atexit
import base64
import json
import logging
import threading
import time
import weakref
from collections.abc import Sequence
from concurrent import futures
from dataclasses import dataclass, field, replace
from typing import Any

from gnomon.errors import GnomonError, NotFound, Unavailable
from gnomon.flight.client import FlightClient
from gnomon.flight.ticket import ScanSpec

log = logging.getLogger("gnomon_app.spark")

#: What a call asking for a follower read sends (the header ``node/server/reads.py`` names).
FOLLOWER_READ = [(b"gnomon-read", b"follower")]


@dataclass(frozen=True)
class Route:
    """Where ``table`` is served: each of its parts (the table, or the sub-tables of a
    partition table) with its owner's Flight endpoint; ``key``: a partition table's key;
    ``followers``: the Flight endpoints of each part's followers."""

    table: str
    parts: list[tuple[str, str]]
    key: list[str] | None
    followers: dict[str, list[str]] = field(default_factory=dict)


def route(endpoint: str, table: str) -> Route:
    """Asked of the node at ``endpoint``; an owner it names as "" is that node."""
    with FlightClient(endpoint) as client:
        answer = client.action("route", table=table)
    parts = [(p["table"], p["flight"] or endpoint) for p in answer["parts"]]
    followers = {p["table"]: list(p.get("followers", [])) for p in answer["parts"]}
    return Route(table, parts, answer.get("key"), followers)


def client(endpoint: str, *, follower: bool = False) -> FlightClient:
    """A client of ``endpoint`` whose calls ask for follower reads if ``follower``."""
    return FlightClient(endpoint, headers=(lambda: FOLLOWER_READ) if follower else None)


@dataclass(frozen=True)
class Split:
    """One ticket and the node to redeem it at (a follower, for a follower read)."""

    ticket: bytes
    owner: str
    follower: bool = False

    def to_json(self) -> dict[str, Any]:
        doc = {"ticket": base64.b64encode(self.ticket).decode(), "owner": self.owner}
        return doc | ({"follower": True} if self.follower else {})

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Split:
        return cls(base64.b64decode(doc["ticket"]), doc["owner"], bool(doc.get("follower")))


@dataclass(frozen=True)
class Held:
    """A snapshot an owner holds for the plan."""

    owner: str
    pin: str
    lease_ms: int


@dataclass
class Plan:
    splits: list[Split] = field(default_factory=list)
    #: URIs of the SSTs read as plain Parquet, and their rows.
    native: list[str] = field(default_factory=list)
    native_rows: int = 0
    #: Schemes of the stores holding the tables' SSTs ("file", "s3a").
    stores: set[str] = field(default_factory=set)
    #: The latest TTL floor of the tables (ms), for the rows read as plain Parquet.
    ttl_floor_ms: int | None = None
    held: list[Held] = field(default_factory=list)

    def add(self, owner: str, info: Any, follower: bool = False) -> None:
        meta = json.loads(info.app_metadata or b"{}")
        self.splits += [Split(ep.ticket.ticket, owner, follower) for ep in info.endpoints]
        for f in meta.get("native", []):
            self.native.append(f["uri"])
            self.native_rows += int(f["rows"])
        if meta.get("store"):
            self.stores.add(meta["store"])
        floor = meta.get("ttl_floor_ms")
        if floor is not None:
            self.ttl_floor_ms = max(floor, self.ttl_floor_ms or floor)
        if "pin" in meta:
            self.held.append(Held(owner, meta["pin"], int(meta["lease_ms"])))

    def splits_json(self) -> str:
        return json.dumps([s.to_json() for s in self.splits])


def plan(
    endpoint: str, spec: ScanSpec, where: Route | None = None, *, follower: bool = False
) -> Plan:
    """``spec`` (its ``lease_ms`` set) planned at the owner of every part of its table (as
    ``where`` says, else as ``endpoint`` answers), in parallel; scan ids
    ``<scan_id>/<part>``, so each owner's ``scan_stats`` of ``scan_id`` sums what it served.
    With ``follower``, each part that has followers is planned at one of them (the parts
    spread over them) and its version also held at its leader. Snapshots held before a
    failing part are released."""
    if spec.lease_ms is None:
        raise ValueError("a plan holds its snapshots: lease_ms is required")
    where = where or route(endpoint, spec.table)

    def one(i: int, part: str, owner: str) -> list[tuple[str, Any, bool]]:
        asked = replace(
            spec, table=part, scan_id=None if spec.scan_id is None else f"{spec.scan_id}/{part}"
        )
        followers = where.followers.get(part, []) if follower else []
        if followers:
            at = followers[i % len(followers)]
            try:
                with client(at, follower=True) as c:
                    info = c.plan(asked)
            except GnomonError as e:  # a follower just dropped or moved: its leader answers
                log.warning(
                    "follower read of a part planned at its leader",
                    extra={"table": part, "follower": at, "error": e.message},
                )
            else:
                return [(at, info, True), (owner, _held_at_leader(part, owner, at, info), False)]
        with FlightClient(owner) as c:
            return [(owner, c.plan(asked), False)]

    result = Plan()
    with futures.ThreadPoolExecutor(max_workers=min(16, len(where.parts))) as pool:
        asked = [pool.submit(one, i, part, owner) for i, (part, owner) in enumerate(where.parts)]
        failure: BaseException | None = None
        for f in asked:
            try:
                for owner, info, at_follower in f.result():
                    result.add(owner, info, at_follower)
            except BaseException as e:  # released below, then raised
                failure = failure or e
    if failure is not None:
        release(result.held)
        raise failure
    return result


def _held_at_leader(part: str, leader: str, follower: str, info: Any) -> Any:
    """The version of ``part`` a follower's plan answer ``info`` holds, held at its
    ``leader`` too: an answer with no tickets and no native files, only the leader's garbage
    collection kept off (the follower's snapshot is released if that fails)."""
    meta = json.loads(info.app_metadata or b"{}")
    kept = ScanSpec(
        table=part, version=meta["version"], lease_ms=int(meta["lease_ms"]), max_splits=1
    )
    try:
        with FlightClient(leader) as c:
            held = json.loads(c.plan(kept).app_metadata or b"{}")
    except BaseException:
        release([Held(follower, meta["pin"], int(meta["lease_ms"]))])
        raise
    return _Answer([], json.dumps({k: held[k] for k in ("pin", "lease_ms")}).encode())


@dataclass(frozen=True)
class _Answer:
    """What :meth:`Plan.add` reads of a plan answer."""

    endpoints: list[Any]
    app_metadata: bytes


def release(held: Sequence[Held]) -> None:
    """Let go of held snapshots. One already gone is fine, and so is one whose owner cannot be
    reached (stopped, say, before the driver that read it): it runs out with its lease, so
    that is no warning (a driver ending after its servers met it for every snapshot)."""
    for h in held:
        try:
            with FlightClient(h.owner) as client:
                client.action("release", pin=h.pin)
        except (NotFound, Unavailable) as e:
            log.debug("snapshot not released", extra={"pin": h.pin, "error": e.message})
        except GnomonError as e:  # it runs out on its own
            log.warning("snapshot release failed", extra={"pin": h.pin, "error": e.message})


class LeaseKeeper:
    """Renews held snapshots from the driver until :meth:`stop` (which releases them), the
    ``until`` callable says to stop, or ``max_s`` passed; a snapshot gone (released, run out,
    or its owner unreachable for longer than its lease, which it then outlived) is dropped.
    Keepers still running when the driver's interpreter exits are stopped first (their
    snapshots released): a daemon thread left in a Flight call as the interpreter finalises
    can crash the process."""

    def __init__(self, held: Sequence[Held], *, max_s: float, until: Any = None) -> None:
        self.held = list(held)
        self._stop = threading.Event()
        self._deadline = time.monotonic() + max_s
        self._until = until
        interval = min((h.lease_ms for h in held), default=60_000) / 3000
        self._thread = threading.Thread(
            target=self._run, args=(interval,), name="gnomon-snapshot-leases", daemon=True
        )
        self._thread.start()
        _running.add(self)

    def _run(self, interval: float) -> None:
        renewed = {h.pin: time.monotonic() for h in self.held}
        while not self._stop.wait(interval):
            now = time.monotonic()
            if now > self._deadline or (self._until is not None and self._until()):
                break
            for h in list(self.held):
                try:
                    with FlightClient(h.owner) as client:
                        client.action("renew", pin=h.pin)
                    renewed[h.pin] = now
                except NotFound:
                    self.held.remove(h)
                except GnomonError as e:
                    if now - renewed[h.pin] > h.lease_ms / 1000:
                        self.held.remove(h)  # run out on its owner by now
                    else:  # a node briefly away: the next round tries again
                        log.warning(
                            "snapshot renew failed", extra={"pin": h.pin, "error": e.message}
                        )
        release(self.held)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        _running.discard(self)


_running: weakref.WeakSet[LeaseKeeper] = weakref.WeakSet()


@atexit.register
def _stop_running() -> None:
    for keeper in list(_running):
        keeper.stop()
