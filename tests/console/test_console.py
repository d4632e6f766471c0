"""The console of a standalone server, in headless Chromium: a SQL answer as a table, a time
series as a chart, the server's error text, the cluster page, and signing in when the server
asks for credentials. Each page is checked to have logged no console error and to have asked
nothing of any other address."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.console.conftest import Watched
from tests.security.conftest import ROOT, admin
from tests.server.conftest import Running, start_standalone

pytestmark = pytest.mark.integration

T0 = 1_700_000_000_000
HOSTS = ("web-1", "web-2", "db-1")
POINTS = 30

OpenPage = Callable[[str], Watched]


def _sql(server: Running, query: str) -> object:
    status, body = server.sql(query)
    assert status == 200, body
    return body


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    root = tmp_path_factory.mktemp("console")
    running = start_standalone(root / "data", root / "server.log")
    _sql(
        running,
        "CREATE TABLE cpu (host string TAG, usage double, ts timestamp NOT NULL, "
        "TIMESTAMP KEY(ts))",
    )
    values = ", ".join(
        f"('{host}', {10 * h + (i * 7 % 13) + i / 3:.2f}, {T0 + i * 60_000})"
        for h, host in enumerate(HOSTS)
        for i in range(POINTS)
    )
    _sql(running, f"INSERT INTO cpu (host, usage, ts) VALUES {values}")
    yield running
    running.server.stop()


def _origin(server: Running) -> str:
    return f"http://127.0.0.1:{server.http_port}"


def _run(page: Page, query: str) -> None:
    page.get_by_role("textbox", name="Query").fill(query)
    page.get_by_role("button", name="Run").click()


def _painted_pixels(page: Page) -> int:
    """Pixels of the chart's canvas that are not blank."""
    return int(
        page.evaluate(
            """() => {
                const canvas = document.querySelector('#chart canvas');
                const ctx = canvas.getContext('2d');
                const data = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
                let painted = 0;
                for (let i = 3; i < data.length; i += 4) if (data[i] !== 0) painted++;
                return painted;
            }"""
        )
    )


def test_query_answers_a_table(server: Running, open_page: OpenPage, screenshots: Path) -> None:
    watched = open_page(_origin(server))
    page = watched.page
    page.goto(f"{_origin(server)}/dashboard")
    _run(page, "SELECT host, count(*) AS n FROM cpu GROUP BY host ORDER BY host")
    expect(page.get_by_role("status").first).to_contain_text("3 rows in")
    table = page.locator("#result table")
    expect(table.locator("thead th")).to_have_text(["host", "n"])
    expect(table.locator("tbody tr")).to_have_count(3)
    expect(table.locator("tbody tr").first.locator("td")).to_have_text(["db-1", str(POINTS)])
    # Not a time series: no chart.
    expect(page.locator("#chart canvas")).to_have_count(0)
    page.screenshot(path=str(screenshots / "console-table.png"))
    watched.check_clean()


def test_time_series_is_drawn(server: Running, open_page: OpenPage, screenshots: Path) -> None:
    watched = open_page(_origin(server))
    page = watched.page
    page.goto(f"{_origin(server)}/dashboard")
    _run(page, "SELECT ts, host, usage FROM cpu ORDER BY ts, host")
    expect(page.get_by_role("status").first).to_contain_text(f"{POINTS * len(HOSTS)} rows in")
    expect(page.locator("#chart canvas")).to_have_count(1)
    # One legend entry per series (per host), after the time axis's.
    legend = page.locator("#chart .u-legend .u-series .u-label")
    expect(legend).to_have_text(["ts", *(f"host={h}" for h in sorted(HOSTS))])
    assert _painted_pixels(page) > 1000
    expect(page.locator("#result tbody tr")).to_have_count(POINTS * len(HOSTS))
    page.screenshot(path=str(screenshots / "console-query.png"))
    # Buckets, as the README's example draws them: one line per host.
    _run(
        page,
        "SELECT time_bucket(ts, 'PT10M') AS t, host, avg(usage) AS cpu FROM cpu "
        "WHERE host IN ('web-1', 'web-2') GROUP BY t, host ORDER BY t",
    )
    expect(legend).to_have_text(["t", "host=web-1", "host=web-2"])
    watched.check_clean()


def test_a_large_answer_shows_its_first_rows(server: Running, open_page: OpenPage) -> None:
    watched = open_page(_origin(server))
    page = watched.page
    page.goto(f"{_origin(server)}/dashboard")
    _run(page, "SELECT a.host, b.usage FROM cpu a CROSS JOIN cpu b LIMIT 1500")
    expect(page.get_by_role("status").first).to_contain_text("1500 rows in", timeout=20_000)
    expect(page.get_by_role("status").first).to_contain_text("the table shows the first 1000")
    expect(page.locator("#result tbody tr")).to_have_count(1000)
    watched.check_clean()


def test_query_error_shows_the_servers_message(server: Running, open_page: OpenPage) -> None:
    watched = open_page(_origin(server))
    page = watched.page
    page.goto(f"{_origin(server)}/dashboard")
    _run(page, "SELECT * FROM no_such_table")
    status, body = server.sql("SELECT * FROM no_such_table")
    assert status >= 400
    error = page.locator("#query-error")
    expect(error).to_be_visible()
    expect(error).to_have_text(body["message"])
    expect(page.locator("#result table")).to_have_count(0)
    # The failed fetch is a console error of the browser's own ("the server responded with
    # a status of 404"); the page itself logged none.
    assert [e for e in watched.errors() if "status of" not in e] == []
    assert watched.elsewhere() == []
    assert watched.overflowing() == []


def test_cluster_page_of_a_standalone_server(
    server: Running, open_page: OpenPage, screenshots: Path
) -> None:
    watched = open_page(_origin(server))
    page = watched.page
    page.goto(f"{_origin(server)}/dashboard")
    page.get_by_role("link", name="Cluster").click()
    expect(page.locator("#page-cluster")).to_be_visible()
    nodes = page.locator("#cluster-nodes tbody tr")
    expect(nodes).to_have_count(1)
    expect(nodes.first).to_contain_text(f"127.0.0.1:{server.grpc_port}")
    expect(nodes.first).to_contain_text("live")
    expect(page.locator("#cluster-tables tbody tr", has_text="cpu")).to_have_count(1)
    expect(page.locator("#cluster-shards tbody tr")).not_to_have_count(0)
    # Refreshed: the status line changes with the next answer.
    before = page.locator("#cluster-status").text_content()
    expect(page.locator("#cluster-status")).not_to_have_text(before or "", timeout=10_000)
    page.screenshot(path=str(screenshots / "console-cluster-standalone.png"))
    watched.check_clean()


@dataclass
class Secured:
    running: Running
    #: An API token of ROOT.
    token: str


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    root = tmp_path_factory.mktemp("console-auth")
    data = root / "data"
    admin(data, "users", "create", ROOT[0], "--password", ROOT[1], "--superuser")
    token = admin(data, "tokens", "create", ROOT[0]).strip()
    running = start_standalone(data, root / "server.log", "--auth", "true")
    yield Secured(running, token)
    running.server.stop()


def test_nothing_is_shown_before_sign_in(
    secured: Secured, open_page: OpenPage, screenshots: Path
) -> None:
    origin = _origin(secured.running)
    watched = open_page(origin)
    page = watched.page
    page.goto(f"{origin}/dashboard")
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    for hidden in ("#page-query", "#page-cluster", "#tabs"):
        expect(page.locator(hidden)).to_be_hidden()
    expect(page.get_by_role("link", name="Cluster")).to_be_hidden()
    page.screenshot(path=str(screenshots / "console-sign-in.png"))
    assert watched.overflowing() == []

    page.get_by_label("User", exact=True).fill(ROOT[0])
    page.get_by_label("Password", exact=True).fill("wrong")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#login-error")).to_contain_text("Sign-in refused")
    expect(page.locator("#page-query")).to_be_hidden()

    page.get_by_label("Password", exact=True).fill(ROOT[1])
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("textbox", name="Query")).to_be_visible()
    expect(page.locator("#who")).to_have_text(f"signed in as {ROOT[0]}")
    _run(page, "SELECT 1 AS one")
    expect(page.locator("#result tbody td")).to_have_text(["1"])
    page.get_by_role("link", name="Cluster").click()
    expect(page.locator("#cluster-nodes tbody tr")).to_have_count(1)
    # The credentials were the page's alone: nothing kept in storage or cookies.
    assert page.evaluate("() => localStorage.length + sessionStorage.length") == 0
    assert page.context.cookies() == []
    assert watched.elsewhere() == []
    # The refused sign-ins and the probe before it are the browser's 401 messages alone.
    assert [e for e in watched.errors() if "status of 401" not in e] == []

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("button", name="Sign in")).to_be_visible()
    expect(page.locator("#page-cluster")).to_be_hidden()


def test_sign_in_with_a_token(secured: Secured, open_page: OpenPage) -> None:
    origin = _origin(secured.running)
    watched = open_page(origin)
    page = watched.page
    page.goto(f"{origin}/dashboard")
    page.get_by_label("API token").fill(secured.token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#who")).to_have_text("signed in with a token")
    _run(page, "SELECT 2 AS two")
    expect(page.locator("#result tbody td")).to_have_text(["2"])
    assert watched.elsewhere() == []
    assert [e for e in watched.errors() if "status of 401" not in e] == []


def test_cluster_page_renders_procedures_and_compaction_nodes(
    server: Running, open_page: OpenPage
) -> None:
    """A cluster's document (answered in place of the server's) as the page shows it."""
    doc = {
        "mode": "cluster",
        "me": "127.0.0.1:7001",
        "nodes": [
            {"name": "127.0.0.1:7001", "role": "leader", "live": True, "load": 1.0},
            {"name": "127.0.0.1:7002", "role": "follower", "live": False, "load": 0.0},
        ],
        "shards": [
            {
                "id": 4,
                "leader": "127.0.0.1:7001",
                "followers": [{"name": "127.0.0.1:7002", "lag_s": 2.5}],
                "epoch": 9,
                "status": "busy",
                "pinned": True,
                "tables": 3,
            }
        ],
        "tables": [],
        "procedures": [
            {"id": 12, "kind": "migrate", "status": "running", "step": 1, "shards": [4]}
        ],
        "compaction_nodes": [
            {"name": "127.0.0.1:7041", "live": True, "load": 0.5, "running": 1, "slots": 2}
        ],
    }
    watched = open_page(_origin(server))
    page = watched.page
    page.route(
        "**/api/cluster",
        lambda route: route.fulfill(status=200, json=doc),
    )
    page.goto(f"{_origin(server)}/dashboard#cluster")
    expect(page.locator("#cluster-mode")).to_have_text("as seen by 127.0.0.1:7001")
    expect(page.locator("#cluster-nodes tbody tr").nth(1)).to_contain_text("down")
    shard = page.locator("#cluster-shards tbody tr")
    expect(shard.locator("td")).to_have_text(
        ["4", "127.0.0.1:7001", "127.0.0.1:7002 (2.5 s behind)", "9", "busy, pinned", "3"]
    )
    procedure = page.locator("#cluster-procedures tbody tr")
    expect(procedure.locator("td")).to_have_text(["12", "migrate", "1", "4", "running", "-"])
    compaction = page.locator("#cluster-compaction tbody tr")
    expect(compaction).to_contain_text("127.0.0.1:7041")
    watched.check_clean()


def test_the_fit_check_sees_a_page_too_wide(server: Running, open_page: OpenPage) -> None:
    watched = open_page(_origin(server))
    page = watched.page
    page.goto(f"{_origin(server)}/dashboard")
    expect(page.get_by_role("button", name="Run")).to_be_visible()
    assert watched.overflowing() == []
    # Through the DOM: the console's content security policy refuses inline style attributes.
    page.evaluate(
        """() => {
            const far = document.createElement("button");
            far.textContent = "far";
            far.style.marginLeft = "1400px";
            document.body.append(far);
        }"""
    )
    found = watched.overflowing()
    assert len(found) == 2 and found[0].startswith("the page is 14"), found
    assert found[1].startswith("<button") and "far" in found[1], found
