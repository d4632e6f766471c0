"""Writing to a gnomon cluster through the HoraeDB SDK while data nodes die.

The SDK in ``Mode.Direct`` asks a node for each table's route, then writes to the table's
owner itself and caches the route. It drops a cached route only when a node answers that it
does not have the table. A node that was killed (``kill -9``, a crash, a lost machine)
answers nothing at all: its connections are refused, so a Direct-mode client goes on sending
that node's tables to it, failing, long after the meta service moved them to other nodes
(within the lease: 6 s in the dev cluster). What recovers it is a new client built on another
node, and that is what this program does after a failed call, trying the nodes in turn. In
``Mode.Proxy`` the node the client talks to forwards each request to the table's owner; the
same rebuild covers that node's own death.

Run against ``gnomon dev-cluster --port-base 6000``, then ``kill -9`` the data node leading
the table's shard (``gnomon admin tables`` names the shard, ``gnomon admin shards`` its
leader)::

    .venv/bin/python examples/sdk_failover.py --nodes 127.0.0.1:6020,127.0.0.1:6021,127.0.0.1:6022

It writes one point at a time (the table is created on its first write), prints what it
wrote each second and every time it builds the client again, and at the end (``--seconds``,
or Ctrl-C) how many points it wrote and the longest time it could not write. Options:
``--mode proxy``, ``--table``, ``--seconds``, ``--rate``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import time
from collections.abc import Callable
from typing import Any

from horaedb_client import Builder, Mode, PointBuilder, RpcContext, ValueBuilder, WriteRequest

#: Pause after a failed call before trying the next node.
RETRY_PAUSE_S = 0.2
#: A call to a node that does not answer gives up after this long.
CALL_TIMEOUT_MS = 2000


def connect(node: str, mode: Any) -> Any:
    """A new SDK client entering the cluster at ``node``: no routes cached yet."""
    builder = Builder(node, mode)
    builder.set_default_database("public")
    return builder.build()


def reason(error: Exception) -> str:
    """The gist of an SDK error, whose text is a long debug dump: the address it could not
    connect to, or what the server answered."""
    text = str(error)
    if refused := re.search(r'Connect \{ addr: "([^"]+)"', text):
        return f"cannot connect to {refused[1]}"
    if answered := re.search(r'code: (\w+), (?:msg|message): "((?:[^"\\]|\\.)*)"', text):
        return f"the server answered {answered[1]}: {answered[2][:120]}"
    return text.splitlines()[0][:160] if text else type(error).__name__


def reading(table: str, n: int) -> Any:
    """Point ``n`` of the table, one millisecond after the one before: a point written twice
    (retried after a call that failed but was stored) overwrites itself."""
    point = PointBuilder(table)
    point.set_timestamp(1_700_000_000_000 + n)
    point.set_tag("writer", ValueBuilder().string("sdk_failover"))
    point.set_field("n", ValueBuilder().int64(n))
    return point.build()


async def write_on(
    nodes: list[str],
    mode: Any,
    points: Callable[[int], Any],
    pace: Callable[[int], float | None],
    said: Callable[[str], None],
) -> int:
    """Write ``points(0)``, ``points(1)``, ... one at a time, each until acknowledged, waiting
    ``pace(n)`` seconds before point ``n`` (None: stop); after a failed call, build the client
    again on the next of ``nodes`` (the SDK keeps a dead node's routes). How many points were
    written."""
    ctx = RpcContext()
    ctx.timeout_ms = CALL_TIMEOUT_MS
    entry = 0
    client = connect(nodes[entry], mode)
    n = 0
    while (wait := pace(n)) is not None:
        await asyncio.sleep(wait)
        request = WriteRequest()
        request.add_points([points(n)])
        try:
            response = await client.write(ctx, request)
            failure = None if response.get_failed() == 0 else "the point was refused"
        except Exception as e:  # the SDK raises one type for every failure
            failure = reason(e)
        if failure is None:
            n += 1
            continue
        entry = (entry + 1) % len(nodes)
        said(f"write failed ({failure}); building the client again on {nodes[entry]}")
        client = connect(nodes[entry], mode)
        await asyncio.sleep(RETRY_PAUSE_S)
    return n


class Progress:
    """What the writer prints: a line a second, each failure, and a summary at the end."""

    def __init__(self, rate: float, seconds: float) -> None:
        self.rate = rate
        self.seconds = seconds
        self.started = self.last_write = self.last_line = time.monotonic()
        self.written = 0
        self.failures = 0
        self.longest_gap_s = 0.0

    def pace(self, n: int) -> float | None:
        """Seconds to wait before writing point ``n`` (``n`` points written so far), to keep
        to the rate; None once the time is up."""
        now = time.monotonic()
        if n > self.written:
            self.longest_gap_s = max(self.longest_gap_s, now - self.last_write)
            self.written, self.last_write = n, now
        if now - self.last_line >= 1.0:
            self.last_line = now
            print(f"{self.clock()} written {self.written:,} points", flush=True)
        if self.seconds and now - self.started >= self.seconds:
            return None
        return max(0.0, self.started + n / self.rate - now)

    def said(self, text: str) -> None:
        self.failures += 1
        print(f"{self.clock()} {text}", flush=True)

    def clock(self) -> str:
        return f"[{time.monotonic() - self.started:7.1f}s]"

    def summary(self) -> str:
        return (
            f"wrote {self.written:,} points in {time.monotonic() - self.started:.1f}s; "
            f"{self.failures} failed calls; the longest time without a write: "
            f"{self.longest_gap_s:.1f}s"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--nodes",
        default="127.0.0.1:6020,127.0.0.1:6021,127.0.0.1:6022",
        help="gRPC endpoints of the data nodes, comma-separated (the first is used first).",
    )
    parser.add_argument("--mode", choices=("direct", "proxy"), default="direct")
    parser.add_argument("--table", default="sdk_failover")
    parser.add_argument("--seconds", type=float, default=0.0, help="0: until Ctrl-C.")
    parser.add_argument("--rate", type=float, default=50.0, help="Points a second.")
    args = parser.parse_args(argv)
    nodes = [n.strip() for n in args.nodes.split(",") if n.strip()]
    mode = Mode.Direct if args.mode == "direct" else Mode.Proxy
    progress = Progress(args.rate, args.seconds)
    print(f"writing to {args.table} through {nodes[0]} ({args.mode} mode)", flush=True)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C: stop writing, say what was done
        asyncio.run(
            write_on(nodes, mode, lambda n: reading(args.table, n), progress.pace, progress.said)
        )
    print(progress.summary(), flush=True)
    return 0


if __name__ == "__main__":
    code = main()
    # The SDK's own threads may crash the interpreter as it finalises, after the work is
    # done: leave without finalising.
    os._exit(code)
