// gnomon's web console: the query page (POST /sql, answered as a table and, for time series,
// a line chart drawn by uPlot) and the cluster page (GET /api/cluster, refreshed every few
// seconds). Credentials, when the server asks for them, live in this page's memory only and
// go with every request; nothing is stored and nothing is asked of any other server.
"use strict";

(function () {
  const REFRESH_MS = 3000;
  // Rows the table shows at most (the chart draws them all): more would stall the page.
  const MAX_TABLE_ROWS = 1000;
  const PALETTE = [
    "#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed",
    "#0891b2", "#db2777", "#65a30d", "#475569", "#ea580c",
  ];
  // Integer milliseconds since the epoch between these (1973 to 5138) are taken for times.
  const MIN_MS = 1e11;
  const MAX_MS = 1e14;
  const TIME_NAME = /^(ts|t|time|timestamp|.*_time|.*_ts|time_.*|bucket|.*timestamp)$/i;

  let authorization = null; // "Basic ..." or "Bearer ...", once signed in
  let clusterTimer = null;
  let chart = null;

  const $ = (id) => document.getElementById(id);

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (key === "class") node.className = value;
      else node.setAttribute(key, value);
    }
    for (const child of children) {
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  // -- requests ----------------------------------------------------------------------------

  class Unauthorized extends Error {}

  async function call(path, init) {
    const headers = new Headers((init && init.headers) || {});
    if (authorization) headers.set("Authorization", authorization);
    // "omit": no browser-kept credentials and no browser sign-in dialog; this page's own.
    const resp = await fetch(path, { ...init, headers, credentials: "omit", cache: "no-store" });
    let body = null;
    const text = await resp.text();
    try {
      body = text ? JSON.parse(text) : null;
    } catch (e) {
      body = { message: text };
    }
    if (resp.status === 401) throw new Unauthorized((body && body.message) || "sign in");
    if (!resp.ok) {
      throw new Error((body && body.message) || `${resp.status} ${resp.statusText}`);
    }
    return body;
  }

  // -- signing in --------------------------------------------------------------------------

  function basic(user, password) {
    const bytes = new TextEncoder().encode(`${user}:${password}`);
    let binary = "";
    for (const b of bytes) binary += String.fromCharCode(b);
    return "Basic " + btoa(binary);
  }

  function showLogin(message) {
    authorization = null;
    stopCluster();
    $("loading").hidden = true;
    $("tabs").hidden = true;
    $("page-query").hidden = true;
    $("page-cluster").hidden = true;
    $("signout").hidden = true;
    $("who").textContent = "";
    $("result").replaceChildren();
    clearChart();
    $("login").hidden = false;
    $("login-error").textContent = message || "";
    $("login-user").focus();
  }

  async function signIn(event) {
    event.preventDefault();
    const token = $("login-token").value.trim();
    const user = $("login-user").value;
    const candidate = token ? `Bearer ${token}` : basic(user, $("login-password").value);
    authorization = candidate;
    try {
      await call("/api/cluster");
    } catch (e) {
      authorization = null;
      $("login-error").textContent =
        e instanceof Unauthorized ? `Sign-in refused: ${e.message}` : e.message;
      return;
    }
    $("login").reset();
    $("login").hidden = true;
    $("who").textContent = token ? "signed in with a token" : `signed in as ${user}`;
    $("signout").hidden = false;
    showApp();
  }

  // -- pages -------------------------------------------------------------------------------

  function showApp() {
    $("loading").hidden = true;
    $("login").hidden = true;
    $("tabs").hidden = false;
    showPage();
  }

  function showPage() {
    if (!$("login").hidden || !$("loading").hidden) return;
    const page = location.hash === "#cluster" ? "cluster" : "query";
    $("page-query").hidden = page !== "query";
    $("page-cluster").hidden = page !== "cluster";
    for (const name of ["query", "cluster"]) {
      const tab = $(`tab-${name}`);
      if (name === page) tab.setAttribute("aria-current", "page");
      else tab.removeAttribute("aria-current");
    }
    if (page === "cluster") startCluster();
    else stopCluster();
    if (page === "query") $("query").focus();
  }

  // -- the query page ----------------------------------------------------------------------

  function clearChart() {
    if (chart) {
      chart.destroy();
      chart = null;
    }
    $("chart").replaceChildren();
  }

  function isNumber(v) {
    return typeof v === "number" && Number.isFinite(v);
  }

  function columnsOf(rows) {
    const names = [];
    const seen = new Set();
    for (const row of rows) {
      for (const name of Object.keys(row)) {
        if (!seen.has(name)) {
          seen.add(name);
          names.push(name);
        }
      }
    }
    return names;
  }

  function looksLikeTime(rows, name) {
    let any = false;
    for (const row of rows) {
      const v = row[name];
      if (v === null || v === undefined) continue;
      if (!Number.isInteger(v) || v < MIN_MS || v > MAX_MS) return false;
      any = true;
    }
    return any;
  }

  // A time series: a time column (integer milliseconds), numeric value columns, and the
  // other (tag) columns telling series apart. Null when the answer is not one.
  function timeSeries(rows, names) {
    if (rows.length === 0) return null;
    const times = names.filter((n) => looksLikeTime(rows, n));
    if (times.length === 0) return null;
    const time = times.find((n) => TIME_NAME.test(n)) || times[0];
    const values = names.filter(
      (n) => n !== time && rows.some((r) => isNumber(r[n])) &&
        rows.every((r) => r[n] === null || r[n] === undefined || isNumber(r[n])),
    );
    if (values.length === 0) return null;
    const tags = names.filter((n) => n !== time && !values.includes(n));
    const xs = [...new Set(rows.map((r) => r[time]).filter(isNumber))].sort((a, b) => a - b);
    const at = new Map(xs.map((x, i) => [x, i]));
    const series = new Map();
    for (const row of rows) {
      if (!isNumber(row[time])) continue;
      const group = tags.map((t) => `${t}=${row[t] ?? "null"}`).join(", ");
      for (const value of values) {
        const label = group
          ? (values.length > 1 ? `${value} {${group}}` : group)
          : value;
        if (!series.has(label)) series.set(label, new Array(xs.length).fill(null));
        if (isNumber(row[value])) series.get(label)[at.get(row[time])] = row[value];
      }
    }
    return { time, xs: xs.map((x) => x / 1000), series };
  }

  function chartWidth() {
    return Math.max(320, $("page-query").clientWidth || 800) - 18;
  }

  function drawChart(ts) {
    clearChart();
    if (typeof uPlot === "undefined") return;
    const target = $("chart");
    const labels = [...ts.series.keys()].sort(
      (a, b) => a.localeCompare(b, "en", { numeric: true }),
    );
    const opts = {
      width: chartWidth(),
      height: 300,
      scales: { x: { time: true } },
      // Times in UTC, as the table shows them.
      tzDate: (seconds) => uPlot.tzDate(new Date(seconds * 1000), "Etc/UTC"),
      series: [
        { label: ts.time },
        ...labels.map((label, i) => ({
          label,
          stroke: PALETTE[i % PALETTE.length],
          width: 1.5,
          spanGaps: true,
          points: { show: ts.xs.length <= 60 },
        })),
      ],
      axes: [{}, { size: 60 }],
      legend: { show: true },
    };
    chart = new uPlot(opts, [ts.xs, ...labels.map((l) => ts.series.get(l))], target);
  }

  // A time (integer milliseconds) as UTC date and time, to the millisecond.
  function utc(ms) {
    return new Date(ms).toISOString().replace("T", " ").replace("Z", "");
  }

  function renderTable(rows, names, time) {
    const head = el("tr", {}, ...names.map((n) => el("th", { scope: "col" }, n)));
    const body = rows.slice(0, MAX_TABLE_ROWS).map((row) =>
      el("tr", {}, ...names.map((n) => {
        const v = row[n];
        if (v === null || v === undefined) return el("td", { class: "null" }, "null");
        if (n === time && isNumber(v)) return el("td", { title: String(v) }, utc(v));
        if (typeof v === "number") return el("td", { class: "num" }, v);
        return el("td", {}, typeof v === "object" ? JSON.stringify(v) : v);
      })),
    );
    return el("table", {}, el("thead", {}, head), el("tbody", {}, ...body));
  }

  async function runQuery() {
    const query = $("query").value;
    if (!query.trim()) return;
    const button = $("run");
    button.disabled = true;
    $("summary").textContent = "Running…";
    $("query-error").hidden = true;
    $("query-error").textContent = "";
    const started = performance.now();
    try {
      const answer = await call("/sql", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ query }),
      });
      const ms = performance.now() - started;
      const took = ms < 1000 ? `${ms.toFixed(0)} ms` : `${(ms / 1000).toFixed(2)} s`;
      clearChart();
      if (answer && Array.isArray(answer.rows)) {
        const rows = answer.rows;
        const names = columnsOf(rows);
        const shown = rows.length > MAX_TABLE_ROWS
          ? ` (the table shows the first ${MAX_TABLE_ROWS})` : "";
        $("summary").textContent =
          `${rows.length} ${rows.length === 1 ? "row" : "rows"} in ${took}${shown}`;
        const ts = timeSeries(rows, names);
        $("result").replaceChildren(rows.length ? renderTable(rows, names, ts && ts.time) : "");
        if (ts) drawChart(ts);
      } else {
        const affected = (answer && answer.affected_rows) || 0;
        $("summary").textContent =
          `${affected} ${affected === 1 ? "row" : "rows"} affected in ${took}`;
        $("result").replaceChildren();
      }
    } catch (e) {
      if (e instanceof Unauthorized) {
        showLogin(`Signed out: ${e.message}`);
        return;
      }
      $("summary").textContent = "Failed";
      $("query-error").textContent = e.message;
      $("query-error").hidden = false;
      $("result").replaceChildren();
      clearChart();
    } finally {
      button.disabled = false;
    }
  }

  // -- the cluster page --------------------------------------------------------------------

  function fixed(v, digits) {
    return v === null || v === undefined ? "-" : Number(v).toFixed(digits);
  }

  function count(v) {
    return v === null || v === undefined ? "-" : Math.round(v).toLocaleString("en");
  }

  function mib(v) {
    if (v === null || v === undefined) return "-";
    if (v < 2 ** 10) return `${Math.round(v)} B`;
    if (v < 2 ** 20) return `${(v / 2 ** 10).toFixed(1)} KiB`;
    if (v < 2 ** 30) return `${(v / 2 ** 20).toFixed(1)} MiB`;
    return `${(v / 2 ** 30).toFixed(2)} GiB`;
  }

  function percent(v) {
    return v === null || v === undefined ? "-" : `${(v * 100).toFixed(0)}%`;
  }

  function live(v) {
    return el("span", { class: v ? "live" : "dead" }, v ? "live" : "down");
  }

  function grid(columns, rows, empty) {
    if (rows.length === 0) return el("p", { class: "muted" }, empty);
    const head = el("tr", {}, ...columns.map((c) =>
      el("th", c.num ? { scope: "col", class: "num" } : { scope: "col" }, c.title)));
    const body = rows.map((row) =>
      el("tr", {}, ...columns.map((c) => {
        const v = c.cell(row);
        return el("td", c.num ? { class: "num" } : {}, v);
      })),
    );
    return el("table", {}, el("thead", {}, head), el("tbody", {}, ...body));
  }

  function renderCluster(doc) {
    $("cluster-mode").textContent = doc.mode === "standalone"
      ? `standalone (${doc.me})` : `as seen by ${doc.me}`;
    $("cluster-nodes").replaceChildren(grid([
      { title: "node", cell: (n) => n.name },
      { title: "role", cell: (n) => n.role },
      { title: "liveness", cell: (n) => live(n.live) },
      { title: "load", cell: (n) => fixed(n.load, 2), num: true },
      { title: "leader shards", cell: (n) => n.leader_shards, num: true },
      { title: "follower shards", cell: (n) => n.follower_shards, num: true },
      { title: "tables", cell: (n) => count(n.tables), num: true },
      { title: "rows/s", cell: (n) => count(n.rows_per_s), num: true },
      { title: "memtable", cell: (n) => mib(n.memtable_bytes), num: true },
      { title: "queries/s", cell: (n) => fixed(n.queries_per_s, 1), num: true },
      { title: "cpu", cell: (n) => percent(n.cpu), num: true },
    ], doc.nodes, "No data node is registered."));
    $("cluster-shards").replaceChildren(grid([
      { title: "shard", cell: (s) => s.id, num: true },
      { title: "leader", cell: (s) => s.leader || "-" },
      {
        title: "followers",
        cell: (s) => s.followers.map((f) => typeof f === "string" ? f
          : f.lag_s === null || f.lag_s === undefined ? f.name
            : `${f.name} (${f.lag_s.toFixed(1)} s behind)`).join(", ") || "-",
      },
      { title: "epoch", cell: (s) => s.epoch, num: true },
      { title: "status", cell: (s) => s.pinned ? `${s.status}, pinned` : s.status },
      { title: "tables", cell: (s) => s.tables, num: true },
    ], doc.shards, "No shard."));
    $("cluster-procedures").replaceChildren(grid([
      { title: "procedure", cell: (p) => p.id, num: true },
      { title: "kind", cell: (p) => p.kind },
      { title: "step", cell: (p) => p.step, num: true },
      { title: "shards", cell: (p) => p.shards.join(", ") },
      { title: "status", cell: (p) => p.status },
      { title: "parameters", cell: (p) => p.params || "-" },
    ], doc.procedures, "No procedure is running."));
    $("cluster-compaction").replaceChildren(grid([
      { title: "node", cell: (n) => n.name },
      { title: "liveness", cell: (n) => live(n.live) },
      { title: "load", cell: (n) => fixed(n.load, 2), num: true },
      { title: "running", cell: (n) => count(n.running), num: true },
      { title: "queued", cell: (n) => count(n.queued), num: true },
      { title: "slots", cell: (n) => count(n.slots), num: true },
      { title: "MiB/s", cell: (n) => fixed(n.bytes_per_s === null ? null : n.bytes_per_s / 2 ** 20, 1), num: true },
      { title: "cpu", cell: (n) => percent(n.cpu), num: true },
    ], doc.compaction_nodes, doc.mode === "standalone"
      ? "A standalone server compacts its tables itself." : "No compaction node: data nodes compact locally."));
    const tables = doc.tables || [];
    $("cluster-tables-section").hidden = tables.length === 0;
    $("cluster-tables").replaceChildren(grid([
      { title: "table", cell: (t) => t.name },
      { title: "rows", cell: (t) => count(t.rows), num: true },
      { title: "SST files", cell: (t) => t.sst_files, num: true },
      { title: "SST size", cell: (t) => mib(t.sst_bytes), num: true },
      { title: "memtable", cell: (t) => mib(t.memtable_bytes), num: true },
    ], tables, "No table."));
  }

  async function refreshCluster() {
    try {
      const doc = await call("/api/cluster");
      renderCluster(doc);
      $("cluster-error").hidden = true;
      $("cluster-status").textContent =
        `Updated ${new Date().toLocaleTimeString()}; refreshed every ${REFRESH_MS / 1000} s.`;
    } catch (e) {
      if (e instanceof Unauthorized) {
        showLogin(`Signed out: ${e.message}`);
        return;
      }
      $("cluster-error").textContent = e.message;
      $("cluster-error").hidden = false;
    }
  }

  function startCluster() {
    if (clusterTimer !== null) return;
    refreshCluster();
    clusterTimer = setInterval(refreshCluster, REFRESH_MS);
  }

  function stopCluster() {
    if (clusterTimer !== null) clearInterval(clusterTimer);
    clusterTimer = null;
  }

  // -- start -------------------------------------------------------------------------------

  async function start() {
    $("run").addEventListener("click", runQuery);
    $("query").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        runQuery();
      }
    });
    $("login").addEventListener("submit", signIn);
    $("signout").addEventListener("click", () => showLogin(""));
    window.addEventListener("hashchange", showPage);
    window.addEventListener("resize", () => {
      if (chart && !$("page-query").hidden) chart.setSize({ width: chartWidth(), height: 300 });
    });
    // Does this server ask for credentials? Nothing is shown until it says.
    try {
      await call("/api/cluster");
      showApp();
    } catch (e) {
      if (e instanceof Unauthorized) showLogin("");
      else showApp();
    }
  }

  start();
})();
