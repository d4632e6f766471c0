"""Every interface refuses an unauthenticated call, a wrong password, an expired or revoked
token and a call outside the caller's grants, and serves the caller its grants allow."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from gnomon.errors import Unauthenticated
from gnomon.flight.ticket import ScanSpec
from gnomon.store.sqlite import SqliteStore
from node.security.accounts import Accounts
from node.security.sessions import SESSION_PREFIX, SessionTokens
from testkit.sdk import run_sdk
from tests.security.conftest import READER, REPO, ROOT, Secured, admin, basic

pytestmark = pytest.mark.integration

CREATE = "CREATE TABLE {} (host string TAG, v double, ts timestamp NOT NULL, TIMESTAMP KEY(ts))"


def _sql(s: Secured, query: str, auth: str | None) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json"}
    if auth is not None:
        headers["Authorization"] = auth
    status, _, body = s.running.request(
        "POST", "/sql", json.dumps({"query": query}).encode(), headers
    )
    return status, json.loads(body)


@pytest.fixture(scope="module")
def tables(secured: Secured) -> Secured:
    for name in ("readable", "hidden"):
        status, body = _sql(secured, CREATE.format(name), basic(*ROOT))
        assert status == 200, body
        status, body = _sql(
            secured, f"INSERT INTO {name} (host, v, ts) VALUES ('a', 1.5, 1000)", basic(*ROOT)
        )
        assert status == 200, body
    return secured


def test_http_refuses_without_credentials_and_with_a_wrong_password(tables: Secured) -> None:
    status, _, body = tables.running.request("POST", "/sql", b'{"query": "SHOW TABLES"}')
    assert status == 401 and b"authentication required" in body
    assert _sql(tables, "SHOW TABLES", basic(ROOT[0], "wrong"))[0] == 401
    assert _sql(tables, "SHOW TABLES", "Bearer gnm_0000000000000000.nonsense-nonsense-x")[0] == 401
    # Probes stay open.
    assert tables.running.request("GET", "/health")[0] == 200


def test_http_answers_by_grants(tables: Secured) -> None:
    status, body = _sql(tables, "SELECT v FROM readable", basic(*READER))
    assert (status, body) == (200, {"rows": [{"v": 1.5}]})
    status, body = _sql(tables, "SELECT v FROM hidden", basic(*READER))
    assert status == 403 and "may not read table 'hidden'" in body["message"]
    status, body = _sql(tables, "SELECT * FROM readable JOIN hidden ON true", basic(*READER))
    assert status == 403
    assert (
        _sql(tables, "INSERT INTO readable (host, v, ts) VALUES ('b', 2, 2)", basic(*READER))[0]
        == 403
    )
    assert _sql(tables, "DROP TABLE readable", basic(*READER))[0] == 403
    status, body = _sql(tables, "SHOW TABLES", basic(*READER))
    assert status == 200 and [r["Tables"] for r in body["rows"]] == ["readable"]
    status, _, _ = tables.running.request(
        "POST", "/influxdb/v1/write", b"readable,host=c v=3 3000", {"Authorization": basic(*READER)}
    )
    assert status == 403


def test_tokens_expire_and_are_revoked(tables: Secured) -> None:
    assert _sql(tables, "SELECT v FROM readable", f"Bearer {tables.token}")[0] == 200
    store = SqliteStore(str(tables.running.data_dir / "meta.db"))
    try:
        accounts = Accounts(store)
        expired = accounts.issue_token(READER[0], ttl_s=0.001)
    finally:
        store.close()
    status, body = _sql(tables, "SELECT v FROM readable", f"Bearer {expired.secret}")
    assert status == 401 and "expired" in body["message"]
    token_id = tables.token.removeprefix("gnm_").split(".")[0]
    admin(tables.running.data_dir, "tokens", "revoke", token_id)
    status, body = _sql(tables, "SELECT v FROM readable", f"Bearer {tables.token}")
    assert status == 401 and "revoked" in body["message"]


def test_grpc_with_the_sdk(tables: Secured, tmp_path: Path) -> None:
    credentials = f"    ROOT, READER = {ROOT!r}, {READER!r}\n"
    scenario = (
        credentials
        + """
    from horaedb_client import Authorization

    SQL = "SELECT v FROM readable"

    def authed(user, password):
        b = Builder(ENDPOINT, Mode.Direct)
        b.set_default_database("public")
        b.set_authorization(Authorization(user, password))
        return b.build()

    async def scenario(ctx):
        out = {}
        out["none"] = await error(query(client("Direct"), ctx, ["readable"], SQL))
        out["wrong"] = await error(query(authed(ROOT[0], "wrong"), ctx, ["readable"], SQL))
        reader = authed(*READER)
        out["rows"] = [r["v"][0] for r in rows(await query(reader, ctx, ["readable"], SQL))]
        out["hidden"] = await error(query(reader, ctx, ["hidden"], "SELECT v FROM hidden"))
        p = point("readable", 5000, {"host": V().string("x")}, {"v": V().double(1.0)})
        out["write"] = await error(write(reader, ctx, [p]))
        out["root_write"] = await write(authed(*ROOT), ctx, [p])
        return out
    """
    )
    out = run_sdk(tables.running.grpc_endpoint, scenario, tmp_path)
    assert "Unauthenticated" in out["none"] and "Unauthenticated" in out["wrong"]
    assert out["rows"] == [1.5]
    assert "403" in out["hidden"] and "may not read table 'hidden'" in out["hidden"]
    assert "403" in out["write"]
    assert out["root_write"] == [1, 0]


def test_flight(tables: Secured) -> None:
    location = f"grpc+tcp://127.0.0.1:{tables.running.flight_port}"
    readable = ScanSpec(table="readable").to_json()
    with flight.connect(location) as client:
        with pytest.raises(flight.FlightUnauthenticatedError):
            client.get_flight_info(flight.FlightDescriptor.for_command(readable))
        wrong = flight.FlightCallOptions(headers=[(b"authorization", basic(ROOT[0], "x").encode())])
        with pytest.raises(flight.FlightUnauthenticatedError):
            client.get_flight_info(flight.FlightDescriptor.for_command(readable), wrong)
    with flight.connect(location) as client:
        options = flight.FlightCallOptions(headers=[(b"authorization", basic(*READER).encode())])
        info = client.get_flight_info(flight.FlightDescriptor.for_command(readable), options)
        table = pa.concat_tables(
            client.do_get(e.ticket, options).read_all() for e in info.endpoints
        )
        assert 1.5 in table.column("v").to_pylist()
        with pytest.raises(flight.FlightError, match="may not read table 'hidden'"):
            client.get_flight_info(
                flight.FlightDescriptor.for_command(ScanSpec(table="hidden").to_json()), options
            )


def test_flight_basic_token_handshake(tables: Secured) -> None:
    """pyarrow's handshake with user and password answers a session token that serves the
    user's later calls within its grants; a wrong password, a token altered or signed
    elsewhere are refused."""
    readable = flight.FlightDescriptor.for_command(ScanSpec(table="readable").to_json())
    hidden = flight.FlightDescriptor.for_command(ScanSpec(table="hidden").to_json())
    with flight.connect(f"grpc+tcp://127.0.0.1:{tables.running.flight_port}") as client:
        with pytest.raises(flight.FlightUnauthenticatedError, match="wrong user name or password"):
            client.authenticate_basic_token(READER[0], "wrong")
        header, bearer = client.authenticate_basic_token(*READER)
        assert header == b"authorization" and bearer.startswith(
            b"Bearer " + SESSION_PREFIX.encode()
        )
        options = flight.FlightCallOptions(headers=[(header, bearer)])
        info = client.get_flight_info(readable, options)
        table = pa.concat_tables(
            client.do_get(e.ticket, options).read_all() for e in info.endpoints
        )
        assert 1.5 in table.column("v").to_pylist()
        with pytest.raises(flight.FlightError, match="may not read table 'hidden'"):
            client.get_flight_info(hidden, options)
        # The user is part of what is signed: naming another one breaks the signature.
        _, _, rest = bearer.decode().partition(":")
        for forged in (
            f"Bearer {SESSION_PREFIX}{ROOT[0]}:{rest}",
            "Bearer " + SessionTokens().issue(READER[0]),
        ):
            forged_options = flight.FlightCallOptions(headers=[(b"authorization", forged.encode())])
            with pytest.raises(
                flight.FlightUnauthenticatedError, match="not issued by this server"
            ):
                client.get_flight_info(readable, forged_options)
    # The server that issued it takes the token on its other interfaces too.
    status, body = _sql(tables, "SELECT v FROM readable", bearer.decode())
    assert status == 200 and {"v": 1.5} in body["rows"]


def test_session_tokens_expire_and_keep_to_their_key() -> None:
    cluster = SessionTokens.for_cluster("a cluster secret")
    token = cluster.issue("reader")
    assert SessionTokens.for_cluster("a cluster secret").user(token) == "reader"
    with pytest.raises(Unauthenticated, match="not issued by this server"):
        SessionTokens.for_cluster("another secret").user(token)
    with pytest.raises(Unauthenticated, match="session token expired"):
        cluster.user(SessionTokens.for_cluster("a cluster secret", ttl_s=-1.0).issue("reader"))
    with pytest.raises(Unauthenticated, match="malformed session token"):
        cluster.user(SESSION_PREFIX + "reader")


def test_refuses_to_serve_others_without_auth(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "gnomon_app.cli",
            "standalone",
            "--bind",
            "0.0.0.0",
            "--data-dir",
            str(tmp_path / "d"),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "without authentication" in done.stdout + done.stderr
