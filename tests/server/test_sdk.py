"""The published ``horaedb-client`` SDK, unchanged, against a real standalone gnomon."""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.sdk import run_sdk
from tests.server.conftest import Running

pytestmark = pytest.mark.integration

T0 = 1_700_000_000_000


def test_sdk_writes_several_tables_and_queries_them(gnomon: Running, tmp_path: Path) -> None:
    out = run_sdk(
        gnomon.grpc_endpoint,
        """
        async def scenario(ctx):
            c = client("Direct")
            t0 = 1700000000000
            pts = [
                point(
                    "sdk_cpu",
                    t0 + i * 1000,
                    {"host": V().string(f"h{i % 2}"), "region": V().string("eu")},
                    {"usage": V().double(i / 10), "count": V().int64(i),
                     "ok": V().bool(i % 2 == 0)},
                )
                for i in range(10)
            ]
            pts.append(point(
                "sdk_mem", t0, {"host": V().string("h0")},
                {"free": V().uint64(2**40), "note": V().string("fine"), "ratio": V().float(0.5)},
            ))
            pts.append(point(
                "sdk_events", t0, {},
                {"payload": V().varbinary(bytes([0, 1, 255])), "level": V().int32(-7),
                 "small": V().int8(3), "u32": V().uint32(4000000000), "at": V().timestamp(t0 - 5)},
            ))
            w = await write(c, ctx, pts)
            cpu = await query(c, ctx, ["sdk_cpu"],
                f"SELECT host, usage, count, ok, timestamp FROM sdk_cpu "
                f"WHERE host = 'h1' AND timestamp >= {t0 + 3000} ORDER BY timestamp")
            mem = await query(c, ctx, ["sdk_mem"], "SELECT * FROM sdk_mem")
            events = await query(c, ctx, ["sdk_events"], "SELECT * FROM sdk_events")
            agg = await query(c, ctx, ["sdk_cpu"],
                "SELECT host, count(*) AS n, max(usage) AS top FROM sdk_cpu "
                "GROUP BY host ORDER BY host")
            return {"write": w, "cpu": rows(cpu), "mem": rows(mem), "events": rows(events),
                    "agg": rows(agg)}
        """,
        tmp_path,
    )
    assert out["write"] == [12, 0]
    assert [r["timestamp"] for r in out["cpu"]] == [
        [T0 + i * 1000, "Timestamp"] for i in (3, 5, 7, 9)
    ]
    assert out["cpu"][0] == {
        "host": ["h1", "String"],
        "usage": [0.3, "Double"],
        "count": [3, "Int64"],
        "ok": [False, "Boolean"],
        "timestamp": [T0 + 3000, "Timestamp"],
    }
    (mem,) = out["mem"]
    # Auto-created as HoraeDB does: tsid, timestamp, then columns in alphabetical order.
    assert list(mem) == ["tsid", "timestamp", "free", "host", "note", "ratio"]
    assert mem["tsid"][1] == "UInt64"
    assert mem["free"] == [2**40, "UInt64"]
    assert mem["note"] == ["fine", "String"]
    assert mem["ratio"] == [0.5, "Float"]
    (ev,) = out["events"]
    assert ev["payload"] == [[0, 1, 255], "Varbinary"]
    assert ev["level"] == [-7, "Int32"]
    assert ev["small"] == [3, "Int8"]
    assert ev["u32"] == [4_000_000_000, "UInt32"]
    assert ev["at"] == [T0 - 5, "Timestamp"]
    assert out["agg"] == [
        {"host": ["h0", "String"], "n": [5, "Int64"], "top": [0.8, "Double"]},
        {"host": ["h1", "String"], "n": [5, "Int64"], "top": [0.9, "Double"]},
    ]


def test_sdk_ddl_write_and_select_in_proxy_mode(gnomon: Running, tmp_path: Path) -> None:
    out = run_sdk(
        gnomon.grpc_endpoint,
        """
        async def scenario(ctx):
            c = client("Proxy")
            ddl = await query(c, ctx, ["demo"],
                "CREATE TABLE IF NOT EXISTS demo (name string TAG, value double, "
                "t timestamp NOT NULL, TIMESTAMP KEY(t)) ENGINE=Analytic with (enable_ttl=false)")
            now = int(time.time() * 1000)
            w = await write(c, ctx, [
                point("demo", now, {"name": V().string("t1")}, {"value": V().double(0.42)}),
                point("demo", now, {"name": V().string("t2")}, {"value": V().double(1.0)}),
            ])
            sel = await query(c, ctx, [], "SELECT * FROM demo WHERE name = 't1'")
            ins = await query(c, ctx, [], "INSERT INTO demo (t, name, value) VALUES (1, 'x', 2.0)")
            many = await asyncio.gather(*(query(c, ctx, ["demo"], "SELECT count(*) AS n FROM demo")
                                         for _ in range(20)))
            drop = await query(c, ctx, [], "DROP TABLE demo")
            return {"ddl": [ddl.affected_rows, ddl.num_rows()], "write": w, "now": now,
                    "rows": rows(sel), "insert": ins.affected_rows,
                    "counts": [rows(r)[0]["n"][0] for r in many],
                    "drop": drop.affected_rows}
        """,
        tmp_path,
    )
    assert out["ddl"] == [0, 0]
    assert out["write"] == [2, 0]
    (row,) = out["rows"]
    assert row["name"] == ["t1", "String"]
    assert row["value"] == [0.42, "Double"]
    assert row["t"] == [out["now"], "Timestamp"]
    assert out["insert"] == 1
    assert out["counts"] == [3] * 20
    assert out["drop"] == 0


def test_sdk_sees_errors_with_horaedb_codes(gnomon: Running, tmp_path: Path) -> None:
    out = run_sdk(
        gnomon.grpc_endpoint,
        """
        async def scenario(ctx):
            proxy = client("Proxy")
            direct = client("Direct")
            t0 = 1700000000000
            await write(proxy, ctx, [point("sdk_err", t0, {"k": V().string("a")},
                                           {"v": V().double(1.0)})])
            return {
                "bad_sql": await error(query(proxy, ctx, ["x"], "SELEC 1")),
                "unknown_table": await error(query(proxy, ctx, ["nope"], "SELECT * FROM nope")),
                "type_mismatch": await error(write(proxy, ctx, [
                    point("sdk_err", t0, {"k": V().string("a")}, {"v": V().int64(1)})])),
                "null_field": await error(write(proxy, ctx, [
                    point("sdk_err", t0, {"k": V().string("a")}, {"v": V().null()})])),
                "tag_as_field": await error(write(proxy, ctx, [
                    point("sdk_err", t0, {}, {"k": V().string("a")})])),
                "direct_write": await error(write(direct, ctx, [
                    point("sdk_err", t0, {"k": V().string("a")}, {"v": V().bool(True)})])),
            }
        """,
        tmp_path,
    )
    assert out["bad_sql"].startswith("Server(ServerError { code: 400")
    assert "sql:SELEC 1" in out["bad_sql"]
    assert out["unknown_table"].startswith("Server(ServerError { code: 500")
    assert "'nope' does not exist" in out["unknown_table"]
    assert out["type_mismatch"].startswith("Server(ServerError { code: 400")
    assert "Value type is not same" in out["type_mismatch"]
    assert out["null_field"].startswith("Server(ServerError { code: 400")
    assert "value type is not supported" in out["null_field"]
    assert "code: 400" in out["tag_as_field"] and "is a tag" in out["tag_as_field"]
    assert out["direct_write"].startswith("RouteBasedWriteError")
    assert "code: 400" in out["direct_write"]


def test_sdk_new_columns_are_added_on_write(gnomon: Running, tmp_path: Path) -> None:
    out = run_sdk(
        gnomon.grpc_endpoint,
        """
        async def scenario(ctx):
            c = client("Proxy")
            t0 = 1700000000000
            await write(c, ctx, [point("sdk_evo", t0, {"old-tag": V().string("a")},
                                       {"old": V().double(1.0)})])
            await write(c, ctx, [point("sdk_evo", t0 + 1, {"old-tag": V().string("b"),
                                                          "new-tag": V().string("n")},
                                       {"old": V().double(2.0), "new": V().int64(5)})])
            r = await query(c, ctx, ["sdk_evo"],
                            "SELECT * FROM sdk_evo ORDER BY `old-tag`")
            return rows(r)
        """,
        tmp_path,
    )
    first, second = out
    assert list(first) == ["tsid", "timestamp", "old", "old-tag", "new", "new-tag"]
    # The SDK ignores validity bitmaps: a null reads as the type's zero value.
    assert first["new"] == [0, "Int64"] and first["new-tag"] == ["", "String"]
    assert second["new"] == [5, "Int64"] and second["new-tag"] == ["n", "String"]


def test_sdk_large_write_and_compressed_result(gnomon: Running, tmp_path: Path) -> None:
    out = run_sdk(
        gnomon.grpc_endpoint,
        """
        async def scenario(ctx):
            c = client("Proxy")
            t0 = 1700000000000
            big = "x" * (5 * 1024 * 1024)
            w_big = await write(c, ctx, [point("sdk_big", t0, {}, {"blob": V().string(big)})])
            r_big = await query(c, ctx, [], "SELECT length(blob) AS n FROM sdk_big")
            pts = [point("sdk_many", t0 + i, {"host": V().string(f"h{i % 7}")},
                         {"text": V().string(f"row-{i}-" + "y" * 64), "i": V().int64(i)})
                   for i in range(3000)]
            w_many = await write(c, ctx, pts)
            r = await query(c, ctx, [], "SELECT i, text FROM sdk_many ORDER BY i")
            got = [(row.column("i").value(), row.column("text").value()) for row in r.iter_rows()]
            ok = got == [(i, f"row-{i}-" + "y" * 64) for i in range(3000)]
            return {"w_big": w_big, "n": rows(r_big)[0]["n"][0], "w_many": w_many,
                    "rows": len(got), "ok": ok}
        """,
        tmp_path,
    )
    assert out["w_big"] == [1, 0]
    assert out["n"] == 5 * 1024 * 1024
    assert out["w_many"] == [3000, 0]
    assert out["rows"] == 3000 and out["ok"]


def test_sdk_reads_expression_columns_by_horaedb_names(gnomon: Running, tmp_path: Path) -> None:
    out = run_sdk(
        gnomon.grpc_endpoint,
        """
        async def scenario(ctx):
            c = client("Proxy")
            await query(c, ctx, [], "CREATE TABLE sdk_names (host string TAG, v double, "
                        "t timestamp NOT NULL, TIMESTAMP KEY(t))")
            await query(c, ctx, [], "INSERT INTO sdk_names (host, v, t) VALUES ('a', 1.5, 1)")
            r = await query(c, ctx, ["sdk_names"], "SELECT sum(v), count(*), 'x' FROM sdk_names")
            (row,) = list(r.iter_rows())
            return {n: row.column(n).value() for n in ["SUM(sdk_names.v)", "COUNT(*)", 'Utf8("x")']}
        """,
        tmp_path,
    )
    assert out == {"SUM(sdk_names.v)": 1.5, "COUNT(*)": 1, 'Utf8("x")': "x"}
