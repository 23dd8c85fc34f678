// Yonder dashboard: plain JavaScript against yonderd's local API
// (docs/openapi.yaml). Served by yonderd with a CSP that allows only this
// file, so nothing here may be inline. Every request rides on the session
// cookie set by /login (credentials same-origin); the browser adds the
// Origin header to POSTs, which the API requires of cookie sessions.
// Live job logs arrive over a WebSocket (GET /v1/jobs/logs/ws, one JSON
// message per batch); if the socket cannot be opened or drops before the
// log ends, they long-poll GET /v1/jobs/logs with wait_ms, as the CLI does.
// #log-output's data-transport says which one delivered ("websocket" or
// "longpoll"); the browser test reads it.
"use strict";

const POLL_MS = 2000;
const LOG_WAIT_MS = 10000;
const SPARK_POINTS = 60;
const TERMINAL = new Set(["exited", "stopped", "failed", "missing"]);

// ---------- helpers

function $(id) { return document.getElementById(id); }

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else if (k === "onclick") e.addEventListener("click", v);
    else e[k] = v;
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  return e;
}

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function api(path, body, signal) {
  const opts = { credentials: "same-origin", headers: {}, signal };
  if (body !== undefined) {
    opts.method = "POST";
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const res = await fetch(path, opts);
  let data = null;
  try { data = await res.json(); } catch (_) { data = null; }
  if (!res.ok) {
    const msg = data && data.error ? data.error.message : res.status + " " + res.statusText;
    if (res.status === 401) showBanner("Not logged in: " + msg);
    throw new ApiError(res.status, msg);
  }
  return data;
}

function showBanner(text) {
  const b = $("banner");
  if (text) { b.textContent = text; b.hidden = false; } else { b.hidden = true; }
}

function fmtBytes(n) {
  if (!n) return "0 B";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return n.toFixed(i ? 1 : 0) + " " + u[i];
}
function fmtTime(s) { return s ? new Date(s * 1000).toLocaleString() : "—"; }
function fmtDuration(s) {
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " min";
  if (s < 86400) return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  return Math.floor(s / 86400) + " d " + Math.floor((s % 86400) / 3600) + " h";
}
function short(id) { return id ? String(id).slice(0, 16) : ""; }
function stateCell(state) { return el("td", { class: "state state-" + state }, state); }

// Re-renders a table body only when its rows changed, so buttons are not
// replaced under the user's (or a test's) pointer every poll.
function renderRows(tableId, emptyId, items, key, rowFn) {
  const tbody = $(tableId).tBodies[0];
  const sig = JSON.stringify(items);
  if (tbody.dataset.sig === sig) return;
  tbody.dataset.sig = sig;
  tbody.replaceChildren(...items.map(rowFn));
  if (emptyId) $(emptyId).hidden = items.length > 0;
  $(tableId).dataset.count = String(items.length);
}

// ---------- node status

async function loadStatus() {
  const s = await api("/v1/status");
  $("node-name").textContent = s.name || "";
  document.title = "Yonder · " + (s.name || "");
  const facts = [
    ["Name", s.name], ["Node id", s.node_id], ["Version", s.version],
    ["Up for", fmtDuration(s.uptime_s || 0)], ["Peers", s.peers],
    ["Link port", s.link_port], ["API", s.api_url],
    ["Backends", (s.backends || []).join(", ")], ["GPU inventory", s.gpu_inventory],
  ];
  const dl = $("status-list");
  dl.replaceChildren(...facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", { "data-fact": k }, v === undefined ? "—" : v)]));
}

// ---------- GPUs: bars and sparklines, sampled every POLL_MS

const gpuHistory = new Map();  // uuid -> {util: [], mem: []}

function sparkline(values, cls) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "spark " + cls);
  svg.setAttribute("viewBox", "0 0 " + (SPARK_POINTS - 1) + " 100");
  svg.setAttribute("preserveAspectRatio", "none");
  const line = document.createElementNS(ns, "polyline");
  const offset = SPARK_POINTS - values.length;
  // Kept off the edges so 0 % and 100 % stay visible.
  line.setAttribute("points", values.map((v, i) => (offset + i) + "," + (97 - 0.94 * v).toFixed(1)).join(" "));
  line.setAttribute("vector-effect", "non-scaling-stroke");
  svg.append(line);
  return svg;
}

function meter(label, text, pct) {
  const fill = el("div");
  fill.style.width = Math.max(0, Math.min(100, pct)).toFixed(1) + "%";
  return el("div", { class: "meter" }, el("div", { class: "label" }, el("span", {}, label), el("span", {}, text)),
            el("div", { class: "bar" }, fill));
}

async function loadGpus() {
  const g = await api("/v1/gpus");
  const devices = g.devices || [];
  $("gpu-summary").textContent = (g.message || "") + (g.driver_version ? " Driver " + g.driver_version + "." : "");
  const cards = devices.map((d) => {
    const h = gpuHistory.get(d.uuid) || { util: [], mem: [] };
    const memPct = d.memory_total_bytes ? (100 * d.memory_used_bytes) / d.memory_total_bytes : 0;
    h.util.push(d.utilisation_percent ?? d.utilization_percent ?? 0);
    h.mem.push(memPct);
    if (h.util.length > SPARK_POINTS) { h.util.shift(); h.mem.shift(); }
    gpuHistory.set(d.uuid, h);
    const util = h.util[h.util.length - 1];
    return el("div", { class: "card gpu", "data-gpu": String(d.index) },
      el("h3", {}, "GPU " + d.index + " · " + d.name),
      meter("Utilisation", util + " %", util), sparkline(h.util, "util"),
      meter("Memory", fmtBytes(d.memory_used_bytes) + " / " + fmtBytes(d.memory_total_bytes), memPct),
      sparkline(h.mem, "mem"));
  });
  $("gpu-list").replaceChildren(...cards);
  if (!devices.length) $("gpu-list").replaceChildren(el("p", { class: "muted" }, "No GPUs: " + (g.detail || g.state || "")));
}

// ---------- peers

async function loadPeers() {
  const p = await api("/v1/peers");
  const rows = (p.peers || []).map((x) => ({
    name: x.name, id: x.node_id, scope: x.grant_summary || "", path: x.path || "", kind: x.path_kind || "",
    rtt: x.rtt_ms, connected: !!x.connected, denied: !!x.denied,
  }));
  renderRows("peer-table", "peer-empty", rows, "id", (r) => el("tr", { "data-peer": r.name },
    el("td", {}, el("strong", {}, r.name), el("br"), el("code", { class: "muted" }, short(r.id))),
    el("td", {}, r.denied ? "denied" : r.scope),
    el("td", {}, r.path || "—", r.kind ? el("span", { class: "muted" }, " (" + r.kind + ")") : null),
    el("td", {}, r.rtt === undefined || r.rtt === null ? "—" : r.rtt + " ms"),
    el("td", { class: r.connected ? "ok" : "muted" }, r.connected ? "yes" : "no")));
}

// ---------- share links

async function loadLinks() {
  const l = await api("/v1/links");
  const rows = (l.links || []).map((x) => ({
    id: x.id, label: x.label, summary: x.summary, state: x.state, left: x.uses_left, total: x.uses_total,
    expires: x.expires_at,
  }));
  renderRows("link-table", "link-empty", rows, "id", (r) => el("tr", { "data-link-id": r.id },
    el("td", {}, el("code", {}, short(r.id)), r.label ? el("div", { class: "muted" }, r.label) : null),
    el("td", {}, r.summary), stateCell(r.state), el("td", {}, r.left + " / " + r.total),
    el("td", {}, fmtTime(r.expires)),
    el("td", {}, r.state === "active"
      ? el("button", { class: "danger revoke", type: "button", onclick: (ev) => revokeLink(r.id, ev.target) }, "Revoke")
      : null)));
}

async function revokeLink(id, button) {
  button.disabled = true;
  try {
    await api("/v1/links/revoke", { id });
    showBanner("");
  } catch (e) {
    showBanner("Revoke failed: " + e.message);
    button.disabled = false;
  }
  await loadLinks();
}

async function newLink() {
  try {
    const r = await api("/v1/share", {});
    $("link-text").textContent = r.link;
    // The daemon's own SVG (rects only), parsed as SVG, never as HTML.
    const qr = $("link-qr");
    qr.replaceChildren();
    if (r.qr_svg) {
      const doc = new DOMParser().parseFromString(r.qr_svg, "image/svg+xml");
      if (doc.documentElement && doc.documentElement.nodeName === "svg") qr.appendChild(document.importNode(doc.documentElement, true));
    }
    $("link-made").hidden = false;
    showBanner("");
  } catch (e) {
    showBanner("Could not make a share link: " + e.message);
  }
  await loadLinks();
}

// ---------- jobs and live logs

async function loadJobs() {
  const [mine, theirs, arrays] = await Promise.all([
    api("/v1/jobs?all=1"), api("/v1/provider/jobs"), api("/v1/mesh/arrays?all=1").catch(() => ({ arrays: [] }))]);
  const arows = (arrays.arrays || []).map((a) => {
    const c = a.counts || {};
    return {
      id: a.array_id, state: a.state, tasks: a.tasks || 0, done: c.done || 0, failed: c.failed || 0,
      running: c.attempts_running || 0, rate: a.throughput_per_min, eta: a.eta_s,
    };
  });
  renderRows("array-table", "array-empty", arows, "id", arrayRow);
  const rows = (mine.jobs || []).map((j) => ({
    id: j.job_id, who: j.provider_name || short(j.provider), cmd: (j.command || []).join(" "), state: j.state,
    exit: j.exit_code,
  }));
  renderRows("job-table", "job-empty", rows, "id", (r) => jobRow(r, false));
  const prow = (Array.isArray(theirs) ? theirs : []).map((j) => ({
    id: j.job_id, who: short(j.peer_id), cmd: (j.command || []).join(" "), state: j.state, exit: j.exit_code,
  }));
  renderRows("pjob-table", "pjob-empty", prow, "id", (r) => jobRow(r, true));
  if (logView && logView.id) {
    const j = (logView.provider ? prow : rows).find((x) => x.id === logView.id);
    if (j) $("log-state").textContent = "(" + j.state + (j.exit === null || j.exit === undefined ? "" : ", exit " + j.exit) + ")";
  }
}

// An array's live progress: done (and failed) of all its tasks as a bar.
function arrayRow(r) {
  const pct = r.tasks ? (100 * (r.done + r.failed)) / r.tasks : 0;
  const text = r.done + "/" + r.tasks + " done" + (r.failed ? ", " + r.failed + " failed" : "") +
    (r.running ? ", " + r.running + " running" : "");
  return el("tr", { "data-array-id": r.id },
    el("td", {}, el("code", { class: "id", title: r.id }, short(r.id))), stateCell(r.state),
    el("td", {}, meter("", text, pct)),
    el("td", { class: "hide-narrow" }, r.rate === undefined ? "—" : r.rate.toFixed(1) + "/min"),
    el("td", {}, r.state === "running" && r.eta > 0 ? fmtDuration(r.eta) : "—"),
    el("td", {}, r.state !== "running" ? null
      : el("button", { class: "danger stop", type: "button", onclick: (ev) => cancelArray(r.id, ev.target) }, "Cancel")));
}

async function cancelArray(id, button) {
  button.disabled = true;
  try {
    await api("/v1/mesh/arrays/cancel", { array_id: id });
  } catch (e) {
    showBanner("Cancelling array " + short(id) + " failed: " + e.message);
  }
  loadJobs();
}

function jobRow(r, provider) {
  const stop = provider ? "/v1/provider/jobs/stop" : "/v1/jobs/stop";
  return el("tr", { "data-job-id": r.id },
    el("td", {}, el("code", { class: "id", title: r.id }, r.id)), el("td", {}, r.who),
    el("td", { class: "hide-narrow" }, el("code", {}, r.cmd)),
    stateCell(r.state), el("td", { class: "exit" }, r.exit === null || r.exit === undefined ? "—" : r.exit),
    el("td", {},
      el("button", { class: "logs", type: "button", onclick: () => openLogs(r.id, provider) }, "Logs"), " ",
      TERMINAL.has(r.state) ? null
        : el("button", { class: "danger stop", type: "button", onclick: (ev) => stopJob(stop, r.id, ev.target) }, "Stop")));
}

async function stopJob(route, id, button) {
  button.disabled = true;
  try {
    await api(route, { job_id: id });
    showBanner("");
  } catch (e) {
    showBanner("Stop failed: " + e.message);
    button.disabled = false;
  }
  await loadJobs();
}

let logView = null;  // {id, provider, controller}

function openLogs(id, provider) {
  if (logView) logView.controller.abort();
  logView = { id, provider, controller: new AbortController() };
  $("log-panel").hidden = false;
  $("log-job").textContent = id;
  $("log-state").textContent = "";
  const out = $("log-output");
  out.replaceChildren();
  out.dataset.ended = "false";
  out.dataset.job = id;
  delete out.dataset.transport;
  followLogs(logView).catch(() => {});
  loadJobs().catch(() => {});
}

// Appends one batch ({"records", "next_offset", "ended"}) to the log view;
// returns true when the log has ended.
function showBatch(view, r) {
  const out = $("log-output");
  const atBottom = out.scrollTop + out.clientHeight >= out.scrollHeight - 4;
  for (const rec of r.records || []) {
    const bin = atob(rec.data || "");
    const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
    out.append(el("span", { class: rec.stream === "stderr" ? "stderr" : "stdout" }, view.decoder.decode(bytes)));
  }
  if (atBottom) out.scrollTop = out.scrollHeight;
  if (typeof r.next_offset === "number") view.offset = r.next_offset;
  if (!r.ended) return false;
  out.dataset.ended = "true";
  out.append(el("span", { class: "muted" }, "[end of log]\n"));
  loadJobs().catch(() => {});
  return true;
}

// Follows the log from offset 0 until it ends or another job is opened:
// over a WebSocket first, then by long-polling from where it stopped.
async function followLogs(view) {
  view.offset = 0;
  view.decoder = new TextDecoder();
  if (await followOverWebSocket(view)) return;
  if (logView === view) await followByLongPoll(view);
}

// Resolves true when the log ended (or another job was opened), false when
// the socket failed first and long-polling should take over.
function followOverWebSocket(view) {
  return new Promise((resolve) => {
    if (typeof WebSocket !== "function") return resolve(false);
    const route = view.provider ? "/v1/provider/jobs/logs/ws" : "/v1/jobs/logs/ws";
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    let ws;
    try {
      ws = new WebSocket(scheme + "//" + location.host + route + "?id=" + encodeURIComponent(view.id) + "&offset=" + view.offset);
    } catch (_) {
      return resolve(false);
    }
    let finished = false;
    const finish = (ended) => { if (!finished) { finished = true; resolve(ended); } };
    view.controller.signal.addEventListener("abort", () => { ws.close(1000); finish(true); });
    ws.onmessage = (ev) => {
      if (logView !== view) { ws.close(1000); return finish(true); }
      let r;
      try { r = JSON.parse(ev.data); } catch (_) { return; }
      if (r.error) {
        $("log-output").append(el("span", { class: "stderr" }, "\n[log stream failed: " + r.error.message + "]\n"));
        return finish(true);
      }
      $("log-output").dataset.transport = "websocket";
      if (showBatch(view, r)) finish(true);
    };
    // A close before the log ended (the daemon restarted, a proxy, a CSP
    // that refuses ws:) hands over to long-polling from the last offset.
    ws.onclose = () => finish(logView !== view);
    ws.onerror = () => {};
  });
}

// Long-polls the log from view.offset; each answer carries base64 records
// and the next offset.
async function followByLongPoll(view) {
  const route = view.provider ? "/v1/provider/jobs/logs" : "/v1/jobs/logs";
  const out = $("log-output");
  let failures = 0;
  while (logView === view) {
    let r;
    try {
      r = await api(route + "?id=" + encodeURIComponent(view.id) + "&offset=" + view.offset + "&wait_ms=" + LOG_WAIT_MS,
                    undefined, view.controller.signal);
      failures = 0;
    } catch (e) {
      if (view.controller.signal.aborted) return;
      if (++failures > 5) { out.append(el("span", { class: "stderr" }, "\n[log stream failed: " + e.message + "]\n")); return; }
      await new Promise((ok) => setTimeout(ok, POLL_MS));
      continue;
    }
    if (logView !== view) return;
    out.dataset.transport = "longpoll";
    if (showBatch(view, r)) return;
  }
}

// ---------- audit

async function loadAudit() {
  const a = await api("/v1/audit?limit=200&verify=1");
  const v = a.verify || {};
  const p = $("audit-verify");
  p.className = v.ok ? "ok" : "bad";
  p.dataset.ok = String(!!v.ok);
  p.textContent = v.ok
    ? "Hash chain verified: " + v.entries + " entries, head " + (v.head_hash || "—").slice(0, 16)
    : "Hash chain verification FAILED" + (v.message ? ": " + v.message : v.error ? ": " + v.error : "");
  const rows = (a.entries || []).slice().reverse().map((e) => ({
    seq: e.seq, at: e.at, actor: e.actor, action: e.action, subject: e.subject,
  }));
  renderRows("audit-table", null, rows, "seq", (r) => el("tr", {},
    el("td", {}, r.seq), el("td", {}, fmtTime(r.at)), el("td", {}, el("code", {}, short(r.actor))),
    el("td", {}, r.action), el("td", {}, el("code", {}, r.subject || ""))));
}

// ---------- tabs and polling

const loaders = { status: loadStatus, gpus: loadGpus, peers: loadPeers, links: loadLinks, jobs: loadJobs, audit: loadAudit };

function currentTab() {
  const t = location.hash.replace("#", "");
  return loaders[t] ? t : "status";
}

function showTab() {
  const tab = currentTab();
  for (const s of document.querySelectorAll("[data-section]")) s.hidden = s.dataset.section !== tab;
  for (const a of document.querySelectorAll("#tabs a")) a.classList.toggle("active", a.dataset.tab === tab);
  refresh();
}

let refreshing = false;
async function refresh() {
  if (refreshing) return;
  refreshing = true;
  try {
    const tab = currentTab();
    // GPUs are sampled on every tick so their charts have history.
    const work = [loadGpus()];
    if (tab !== "gpus") work.push(loaders[tab]());
    await Promise.all(work);
    document.body.dataset.loaded = tab;
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) showBanner("yonderd did not answer: " + e.message);
  } finally {
    refreshing = false;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("link-new").addEventListener("click", newLink);
  window.addEventListener("hashchange", showTab);
  showTab();
  setInterval(refresh, POLL_MS);
});
