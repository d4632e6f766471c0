"""Running scenarios with the published ``horaedb_client`` SDK in a subprocess.

The SDK's tokio threads occasionally crash the interpreter at exit, after the work is done, so
each scenario runs in its own process, prints its outcome as one JSON line and leaves with
``os._exit``; the test judges that line, not the exit code.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

PRELUDE = """
import asyncio, json, os, sys, time
from horaedb_client import (
    Builder, DataType, Mode, PointBuilder, RpcContext, SqlQueryRequest, ValueBuilder,
    WriteRequest,
)

V = ValueBuilder


def point(table, ts, tags, fields):
    p = PointBuilder(table)
    p.set_timestamp(ts)
    for k, v in tags.items():
        p.set_tag(k, v)
    for k, v in fields.items():
        p.set_field(k, v)
    return p.build()


def rows(resp):
    return [
        {c.name(): [c.value(), str(c.data_type()).split(".")[-1]] for c in r.iter_columns()}
        for r in resp.iter_rows()
    ]


async def write(client, ctx, points):
    req = WriteRequest()
    req.add_points(points)
    resp = await client.write(ctx, req)
    return [resp.get_success(), resp.get_failed()]


async def query(client, ctx, tables, sql):
    return await client.sql_query(ctx, SqlQueryRequest(tables, sql))


async def error(coro):
    try:
        await coro
    except Exception as e:
        return str(e)
    return None


def client(mode):
    b = Builder(ENDPOINT, getattr(Mode, mode))
    b.set_default_database("public")
    return b.build()


async def _main():
    ctx = RpcContext()
    ctx.timeout_ms = 10000
    return await scenario(ctx)
"""

EPILOGUE = """
out = asyncio.run(_main())
print("RESULT " + json.dumps(out), flush=True)
sys.stdout.flush()
os._exit(0)
"""


def run_sdk(endpoint: str, scenario: str, tmp: Path, *, timeout_s: float = 60.0) -> Any:
    """Run ``scenario`` (the source of ``async def scenario(ctx): ...`` returning a JSON-able
    value; ``ENDPOINT`` and the prelude's helpers are in scope) and return its value."""
    script = tmp / "scenario.py"
    script.write_text(f"ENDPOINT = {endpoint!r}\n" + PRELUDE + textwrap.dedent(scenario) + EPILOGUE)
    proc = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    raise AssertionError(
        f"SDK scenario printed no result (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    )
