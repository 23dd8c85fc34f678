// Yonder dashboard: plain JavaScript against yonderd's local API
// (docs/openapi.yaml). Served by yonderd with a CSP that allows only this
// origin's files, so nothing here may be inline. Every request rides on the
// session cookie set by /login (credentials same-origin); the browser adds
// the Origin header to POSTs, which the API requires of cookie sessions.
//
// Charts read the history the daemon stores (GET /v1/history), so they
// show the past at once after a reload; uPlot (the global `uPlot`, served
// by yonderd from npm at /assets/uplot.js) draws them. Each chart's box
// carries data-points (the points drawn now) and data-first-points (the
// points of its first drawing), which the browser test reads.
//
// Live job logs arrive over a WebSocket (GET /v1/jobs/logs/ws, one JSON
// message per batch); if the socket cannot be opened or drops before the
// log ends, they long-poll GET /v1/jobs/logs with wait_ms, as the CLI does.
// #log-output's data-transport says which one delivered ("websocket" or
// "longpoll").
"use strict";

const POLL_MS = 2000;
const LOG_WAIT_MS = 10000;
const TERMINAL = new Set(["exited", "stopped", "failed", "missing"]);
const CAPABILITIES = [
  ["run", "run jobs"], ["exec", "open a shell in its jobs"], ["forward", "forward ports"],
  ["files", "copy files in and out"], ["mesh", "see capacity and opinions (mesh)"],
  ["cuda", "drive its GPU from their own programs (remote CUDA)"]];
const CHART_HEIGHT = 120;
const COLORS = ["#2f6fde", "#b7791f", "#1f8a4c", "#c0392b"];

// ---------- helpers

function $(id) { return document.getElementById(id); }

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null) continue;
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
    if (res.status === 401) showBanner("Not logged in: " + msg + ". Run `yonder dashboard` for a new login link.");
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
  while (Math.abs(n) >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return n.toFixed(i ? 1 : 0) + " " + u[i];
}
function fmtTime(s) { return s ? new Date(s * 1000).toLocaleString() : "—"; }
function fmtDuration(s) {
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " min";
  if (s < 86400) return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  return Math.floor(s / 86400) + " d " + Math.floor((s % 86400) / 3600) + " h";
}
function fmtNum(v, digits) { return v === undefined || v === null ? "—" : Number(v).toFixed(digits ?? 1); }
function short(id) { return id ? String(id).slice(0, 16) : ""; }
function stateCell(state) { return el("td", { class: "state state-" + state }, state); }
function idCode(id) { return el("code", { class: "id", title: id }, short(id)); }

// Re-renders a table body only when its rows changed, so buttons are not
// replaced under the user's (or a test's) pointer every poll.
function renderRows(tableId, emptyId, items, rowFn) {
  const tbody = $(tableId).tBodies[0];
  const sig = JSON.stringify(items);
  if (emptyId) $(emptyId).hidden = items.length > 0;
  $(tableId).dataset.count = String(items.length);
  if (tbody.dataset.sig === sig) return;
  tbody.dataset.sig = sig;
  tbody.replaceChildren(...items.map(rowFn));
}

// "20G", "512M" as bytes (binary units, a unit required, at least 1 MiB),
// as the CLI reads --vram; "" is null (no limit).
function parseSize(text, what) {
  const t = text.trim();
  if (!t) return null;
  const m = /^(\d+)([KMGT])i?B?$/i.exec(t);
  if (!m) throw new Error(what + ": write a whole number and a unit, like 20G or 512M");
  const n = Number(m[1]) * 1024 ** (1 + "KMGT".indexOf(m[2].toUpperCase()));
  if (n < 1024 * 1024) throw new Error(what + ": give at least 1M (like 512M)");
  return n;
}
// "90s", "30m", "2h", "1d" (or plain seconds) as seconds; "" is null.
function parseDuration(text, what) {
  const t = text.trim();
  if (!t) return null;
  const m = /^(\d+)([smhd]?)$/i.exec(t);
  if (!m) throw new Error(what + ": write a duration like 90s, 30m, 2h or 1d");
  return Number(m[1]) * { "": 1, s: 1, m: 60, h: 3600, d: 86400 }[m[2].toLowerCase()];
}
function sizeText(bytes) {
  if (!bytes) return "";
  for (const [u, m] of [["T", 2 ** 40], ["G", 2 ** 30], ["M", 2 ** 20]]) if (bytes % m === 0) return bytes / m + u;
  return Math.ceil(bytes / 2 ** 20) + "M";
}
function durationText(s) {
  if (!s) return "";
  for (const [u, m] of [["d", 86400], ["h", 3600], ["m", 60]]) if (s % m === 0) return s / m + u;
  return s + "s";
}

// Fills a fieldset with one checkbox per capability (name cap-<name>).
function capabilityBoxes(fieldset) {
  for (const [name, what] of CAPABILITIES) {
    fieldset.append(el("label", { class: "check", title: what },
      el("input", { type: "checkbox", name: "cap-" + name, value: name, checked: name === "run" }), " " + name));
  }
}
function checkedCapabilities(form) {
  return CAPABILITIES.map(([n]) => n).filter((n) => form.elements["cap-" + n].checked).join(",");
}

// ---------- peer names (node id -> name) and this node's id

const names = new Map();
let selfId = "";

async function loadNames() {
  const p = await api("/v1/peers");
  for (const x of p.peers || []) names.set(x.node_id, x.name);
  return p;
}
function peerName(id) {
  if (!id) return "—";
  if (id === "local" || id === selfId) return "this node";
  return names.get(id) || short(id);
}

// ---------- node status

// This node's id and name, in the header on every tab.
function showSelf(s) {
  selfId = s.node_id || selfId;
  $("node-name").textContent = s.name || "";
  document.title = "Yonder · " + (s.name || "");
}

async function loadStatus() {
  const s = await api("/v1/status");
  showSelf(s);
  const facts = [
    ["Name", s.name], ["Node id", s.node_id], ["Version", s.version],
    ["Up for", fmtDuration(s.uptime_s || 0)], ["Peers", s.peers],
    ["Link port", s.link_port], ["API", s.api_url],
    ["Backends", (s.backends || []).join(", ")], ["GPU inventory", s.gpu_inventory],
  ];
  $("status-list").replaceChildren(...facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", { "data-fact": k }, v === undefined ? "—" : v)]));
}

// ---------- GPUs: the inventory now, and each device's stored history

function meter(label, text, pct) {
  const fill = el("div");
  fill.style.width = Math.max(0, Math.min(100, pct)).toFixed(1) + "%";
  return el("div", { class: "meter" }, el("div", { class: "label" }, el("span", {}, label), el("span", {}, text)),
            el("div", { class: "bar" }, fill));
}

async function loadGpus() {
  const [g, series] = await Promise.all([api("/v1/gpus"), history("prefix=gpu.")]);
  const devices = g.devices || [];
  $("gpu-summary").textContent = (g.message || "") + (g.driver_version ? " Driver " + g.driver_version + "." : "");
  const list = $("gpu-list");
  if (!devices.length) {
    list.replaceChildren(el("p", { class: "muted" }, "No GPUs: " + (g.detail || g.state || "") + " (`yonder doctor` says why)."));
    return;
  }
  for (const p of list.querySelectorAll(":scope > p")) p.remove();
  const have = byName(series);
  const keep = new Set(devices.map((d) => String(d.index)));
  for (const card of [...list.children]) if (!keep.has(card.dataset.gpu)) { dropCharts(card.querySelector(".charts"), new Set()); card.remove(); }
  for (const d of devices) {
    let card = [...list.children].find((c) => c.dataset.gpu === String(d.index));
    if (!card) {
      card = el("div", { class: "card gpu", "data-gpu": String(d.index) }, el("h3"), el("div", { class: "now" }), el("div", { class: "charts" }));
      list.append(card);
    }
    const util = d.utilization_percent ?? d.utilisation_percent ?? 0;
    const memPct = d.memory_total_bytes ? (100 * d.memory_used_bytes) / d.memory_total_bytes : 0;
    card.querySelector("h3").textContent = "GPU " + d.index + " · " + d.name;
    const facts = [d.temperature_c ? d.temperature_c + " °C" : null, d.power_milliwatts ? (d.power_milliwatts / 1000).toFixed(0) + " W" : null];
    card.querySelector(".now").replaceChildren(
      meter("Utilisation", util + " %", util),
      meter("Memory", fmtBytes(d.memory_used_bytes) + " / " + fmtBytes(d.memory_total_bytes), memPct),
      el("div", { class: "muted small" }, facts.filter(Boolean).join(" · ")));
    const host = card.querySelector(".charts");
    const pre = "gpu." + d.index + ".";
    const pts = (name) => (have.get(pre + name) || { points: [] }).points;
    const total = pts("memory_total_bytes").length ? pts("memory_total_bytes").at(-1)[1] : d.memory_total_bytes;
    drawChart(chartBox(host, pre + "utilization_percent", "Utilisation"), "%", [{ label: "utilisation", points: pts("utilization_percent") }], [0, 100]);
    drawChart(chartBox(host, pre + "memory_used_bytes", "VRAM used (of " + fmtBytes(total) + ")"), "bytes",
      [{ label: "VRAM used", points: pts("memory_used_bytes") }], total ? [0, total] : null);
    drawChart(chartBox(host, pre + "temperature_c", "Temperature"), "°C", [{ label: "temperature", points: pts("temperature_c") }], null);
    drawChart(chartBox(host, pre + "power_watts", "Power"), "W", [{ label: "power", points: pts("power_watts") }], null);
  }
}

// ---------- peers: the list, deny/allow, scope, link throughput

let pendingDeny = null;  // node id waiting for the deny's confirmation
let peerRows = [];

async function loadPeers() {
  const [p, traffic] = await Promise.all([loadNames(), history("prefix=peer.")]);
  peerRows = (p.peers || []).map((x) => ({
    name: x.name, id: x.node_id, scope: x.grant_summary || "", grant: x.grant || {}, path: x.path || "",
    kind: x.path_kind || "", rtt: x.rtt_ms === undefined || x.rtt_ms === null ? null : Math.round(x.rtt_ms * 10) / 10,
    connected: !!x.connected, denied: !!x.denied, digits: x.check_digits || "", confirm: pendingDeny === x.node_id,
  }));
  renderRows("peer-table", "peer-empty", peerRows, peerRow);
  drawTraffic(traffic);
}

function peerRow(r) {
  let actions;
  if (r.denied) {
    actions = [el("button", { class: "allow", type: "button", onclick: (ev) => peerAction("/v1/peers/allow", r, ev.target) }, "Allow")];
  } else if (r.confirm) {
    actions = [el("span", { class: "bad" }, "Deny " + r.name + "? Its sessions close now. "),
      el("button", { class: "danger deny-confirm", type: "button", onclick: (ev) => peerAction("/v1/peers/deny", r, ev.target) }, "Yes, deny"), " ",
      el("button", { class: "deny-cancel", type: "button", onclick: () => { pendingDeny = null; loadPeers(); } }, "Cancel")];
  } else {
    actions = [el("button", { class: "scope-edit", type: "button", onclick: () => openScope(r) }, "Scope…"), " ",
      el("button", { class: "danger deny", type: "button", onclick: () => { pendingDeny = r.id; loadPeers(); } }, "Deny")];
  }
  return el("tr", { "data-peer": r.name, "data-denied": String(r.denied) },
    el("td", {}, el("strong", {}, r.name), el("br"), el("code", { class: "muted" }, short(r.id)),
      r.digits ? el("div", { class: "muted check-digits", title: "The same on both sides, or someone was in the middle" },
        "check digits " + r.digits) : null),
    el("td", { class: "scope" }, r.denied ? el("span", { class: "bad" }, "denied") : r.scope),
    el("td", {}, r.path || "—", r.kind ? el("span", { class: "muted" }, " (" + r.kind + ")") : null),
    el("td", {}, r.rtt === null ? "—" : r.rtt + " ms"),
    el("td", { class: r.connected ? "ok" : "muted" }, r.connected ? "yes" : "no"),
    el("td", { class: "actions" }, ...actions));
}

async function peerAction(route, r, button) {
  button.disabled = true;
  try {
    await api(route, { peer: r.id });
    showBanner("");
  } catch (e) {
    showBanner((route.endsWith("deny") ? "Denying " : "Allowing ") + r.name + " failed: " + e.message);
  }
  pendingDeny = null;
  await loadPeers();
}

// The scope form, filled with the peer's grant; only changed limits are
// sent (the daemon checks an explicit GPU count against its own GPUs).
function openScope(r) {
  const f = $("scope-form");
  f.dataset.peer = r.id;
  $("scope-peer").textContent = r.name;
  const g = r.grant;
  const caps = new Set(String(g.capabilities || "").split(",").filter(Boolean));
  for (const [n] of CAPABILITIES) f.elements["cap-" + n].checked = caps.has(n);
  const initial = { gpus: String(g.gpus ?? ""), max_jobs: String(g.max_jobs ?? ""), vram: sizeText(g.vram_bytes), max_time: durationText(g.max_time_s) };
  for (const [k, v] of Object.entries(initial)) f.elements[k].value = v;
  f.elements.egress.checked = !!g.egress;
  f.dataset.initial = JSON.stringify(initial);
  f.hidden = false;
  f.scrollIntoView({ block: "nearest" });
}

async function saveScope(ev) {
  ev.preventDefault();
  const f = $("scope-form");
  const initial = JSON.parse(f.dataset.initial || "{}");
  const changed = (k) => f.elements[k].value.trim() !== initial[k];
  const body = { peer: f.dataset.peer, capabilities: checkedCapabilities(f), egress: f.elements.egress.checked };
  try {
    if (changed("gpus")) body.gpus = Number(f.elements.gpus.value || 0);
    if (changed("max_jobs")) body.max_jobs = Number(f.elements.max_jobs.value || 1);
    if (changed("vram")) body.vram_bytes = parseSize(f.elements.vram.value, "VRAM per job") ?? 0;
    if (changed("max_time")) body.max_time_s = parseDuration(f.elements.max_time.value, "Wall time per job") ?? 0;
    await api("/v1/peers/scope", body);
    f.hidden = true;
    showBanner("");
  } catch (e) {
    showBanner("The scope was not changed: " + e.message);
  }
  await loadPeers();
}

function drawTraffic(series) {
  const host = $("peer-charts");
  const peers = new Map();  // node id -> {received, sent}
  for (const s of series) {
    const m = /^peer\.(.+)\.(received|sent)_bytes_per_s$/.exec(s.name);
    if (!m) continue;
    if (!peers.has(m[1])) peers.set(m[1], { received: [], sent: [] });
    peers.get(m[1])[m[2]] = s.points || [];
  }
  const keep = new Set([...peers.keys()].map((id) => "peer." + id));
  dropCharts(host, keep);
  for (const [id, t] of peers) {
    const box = chartBox(host, "peer." + id, peerName(id));
    box.dataset.peer = names.get(id) || id;
    drawChart(box, "bytes/s", [{ label: "received", points: t.received }, { label: "sent", points: t.sent }], null);
  }
  $("peer-charts-empty").hidden = peers.size > 0;
}

// ---------- share links: the form, copy, revoke

async function loadLinks() {
  const l = await api("/v1/links");
  const rows = (l.links || []).map((x) => ({
    id: x.id, label: x.label, summary: x.summary, state: x.state, left: x.uses_left, total: x.uses_total,
    expires: x.expires_at,
  }));
  renderRows("link-table", "link-empty", rows, (r) => el("tr", { "data-link-id": r.id },
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

// POST /v1/share with what the form says; empty limits are left to the
// daemon's defaults (1 GPU, 1 job, 2 h), as `yonder share` leaves them.
async function newLink(ev) {
  ev.preventDefault();
  const f = $("link-form");
  const v = (k) => f.elements[k].value.trim();
  try {
    const body = { capabilities: checkedCapabilities(f), egress: f.elements.egress.checked,
      expires_s: Number(v("expires_s")), uses: Number(v("uses") || 1), label: v("label") };
    if (!body.capabilities) throw new Error("tick at least one thing the holder may do (run, for jobs)");
    if (v("gpus")) body.gpus = Number(v("gpus"));
    if (v("max_jobs")) body.max_jobs = Number(v("max_jobs"));
    const vram = parseSize(v("vram"), "VRAM per job");
    if (vram) body.vram_bytes = vram;
    const maxTime = parseDuration(v("max_time"), "Wall time per job");
    if (maxTime !== null) body.max_time_s = maxTime;
    const r = await api("/v1/share", body);
    $("link-text").textContent = r.link;
    $("link-scope").textContent = r.summary || "";
    $("link-made").dataset.linkId = r.id;
    const copy = $("link-copy");
    copy.textContent = "Copy";
    delete copy.dataset.copied;
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

// The clipboard API where the browser allows it (a secure context, a
// focused page); otherwise the old way: select the text and copy it.
async function copyLink() {
  const button = $("link-copy");
  const text = $("link-text").textContent;
  let ok = false;
  if (navigator.clipboard && window.isSecureContext) {
    const timeout = new Promise((_, fail) => setTimeout(() => fail(new Error("timeout")), 1000));
    try { await Promise.race([navigator.clipboard.writeText(text), timeout]); ok = true; } catch (_) { ok = false; }
  }
  if (!ok) {
    const range = document.createRange();
    range.selectNodeContents($("link-text"));
    const sel = window.getSelection();
    sel.removeAllRanges();
    sel.addRange(range);
    try { ok = document.execCommand("copy"); } catch (_) { ok = false; }
  }
  button.textContent = ok ? "Copied" : "Copy failed: select the link and copy it by hand";
  button.dataset.copied = String(ok);
}

// ---------- jobs, live logs and a provider job's use

async function loadJobs() {
  const [mine, theirs, arrays] = await Promise.all([
    api("/v1/jobs?all=1"), api("/v1/provider/jobs"), api("/v1/mesh/arrays?all=1").catch(() => ({ arrays: [] })),
    names.size ? null : loadNames().catch(() => null)]);
  const arows = (arrays.arrays || []).map((a) => {
    const c = a.counts || {};
    return {
      id: a.array_id, state: a.state, tasks: a.tasks || 0, done: c.done || 0, failed: c.failed || 0,
      running: c.attempts_running || 0, rate: a.throughput_per_min, eta: a.eta_s,
    };
  });
  renderRows("array-table", "array-empty", arows, arrayRow);
  const rows = (mine.jobs || []).map((j) => ({
    id: j.job_id, who: j.provider_name || short(j.provider), cmd: (j.command || []).join(" "), state: j.state,
    exit: j.exit_code,
  }));
  renderRows("job-table", "job-empty", rows, (r) => jobRow(r, false));
  const prow = (Array.isArray(theirs) ? theirs : []).map((j) => ({
    id: j.job_id, who: peerName(j.peer_id), cmd: (j.command || []).join(" "), state: j.state, exit: j.exit_code,
  }));
  renderRows("pjob-table", "pjob-empty", prow, (r) => jobRow(r, true));
  if (logView && logView.id) {
    const j = (logView.provider ? prow : rows).find((x) => x.id === logView.id);
    if (j) $("log-state").textContent = "(" + j.state + (j.exit === null || j.exit === undefined ? "" : ", exit " + j.exit) + ")";
    if (logView.provider) await loadJobUsage(logView.id);
  }
}

// A job this node runs for a peer: its CPU, memory, VRAM and GPU use.
async function loadJobUsage(id) {
  const pre = "job." + id + ".";
  const have = byName(await history("prefix=" + encodeURIComponent(pre)));
  if (!logView || logView.id !== id) return;
  const host = $("job-charts");
  const wanted = [["cpu_percent", "CPU", "%"], ["memory_bytes", "Memory", "bytes"],
    ["vram_used_bytes", "VRAM used", "bytes"], ["gpu_utilization_percent", "GPU utilisation", "%"]];
  const shown = wanted.filter(([n]) => have.has(pre + n));
  dropCharts(host, new Set(shown.map(([n]) => pre + n)));
  for (const [n, title, unit] of shown) {
    drawChart(chartBox(host, pre + n, title), unit, [{ label: title.toLowerCase(), points: have.get(pre + n).points || [] }],
      n === "gpu_utilization_percent" ? [0, 100] : null);
  }
  const missing = wanted.filter(([n]) => !have.has(pre + n)).map(([, t]) => t);
  $("job-charts-note").textContent = !shown.length
    ? "No use recorded yet: it is sampled while the job runs."
    : missing.length ? missing.join(" and ") + ": not reported (the job has no GPU, or the driver cannot say)." : "";
  $("job-usage").hidden = false;
}

// An array's live progress: done (and failed) of all its tasks as a bar.
function arrayRow(r) {
  const pct = r.tasks ? (100 * (r.done + r.failed)) / r.tasks : 0;
  const text = r.done + "/" + r.tasks + " done" + (r.failed ? ", " + r.failed + " failed" : "") +
    (r.running ? ", " + r.running + " running" : "");
  return el("tr", { "data-array-id": r.id },
    el("td", {}, idCode(r.id)), stateCell(r.state),
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
  return el("tr", { "data-job-id": r.id, class: logView && logView.id === r.id ? "chosen" : null },
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
  $("job-usage").hidden = true;
  dropCharts($("job-charts"), new Set());
  for (const t of ["job-table", "pjob-table"]) {
    for (const tr of $(t).tBodies[0].rows) tr.classList.toggle("chosen", tr.dataset.jobId === id);
  }
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

// ---------- credits and receipts

// Asking providers for missing receipts costs round trips: done when the
// tab opens, not on every poll.
let creditsFetched = false;

async function loadCredits() {
  const q = creditsFetched ? "?fetch=0" : "";
  creditsFetched = true;
  const [c, r] = await Promise.all([api("/v1/credits" + q), api("/v1/receipts" + q)]);
  const pr = c.params || {};
  $("credits-params").textContent = "Credits are GPU-seconds weighed by GPU model; every peer starts with " +
    fmtNum(pr.starting_allowance, 0) + ". Queue order here: " + (pr.queue_order || "—") + ".";
  const crows = (c.peers || []).map((p) => ({
    id: p.peer_id, name: p.name || short(p.peer_id), given: p.given, taken: p.taken, balance: p.balance,
    receipts: p.receipts, raw: [p.given_gpu_seconds, p.taken_gpu_seconds],
  }));
  renderRows("credit-table", "credit-empty", crows, (x) => el("tr", { "data-peer": x.name },
    el("td", {}, el("strong", {}, x.name)),
    el("td", { title: fmtNum(x.raw[0]) + " GPU-seconds run for them" }, fmtNum(x.given)),
    el("td", { title: fmtNum(x.raw[1]) + " GPU-seconds they ran for this node" }, fmtNum(x.taken)),
    el("td", { class: x.balance < 0 ? "bad" : null }, fmtNum(x.balance)),
    el("td", { class: "hide-narrow" }, x.receipts)));
  const rrows = (r.receipts || []).map((x) => ({
    job: x.job_id, peer: x.peer_name || short(x.peer_id), role: x.role, gpu: x.gpu_model || "", secs: x.gpu_seconds,
    claimed: x.claimed_gpu_seconds, state: x.state, problem: x.problem || "", end: x.end_ms,
  })).sort((a, b) => (b.end || 0) - (a.end || 0));
  renderRows("receipt-table", "receipt-empty", rrows, (x) => el("tr",
    { "data-job-id": x.job, "data-state": x.state, class: x.state === "disputed" || x.state === "refused" ? "disputed" : null },
    el("td", {}, el("strong", {}, x.peer), el("div", { class: "muted small" }, x.role === "provider" ? "I ran its job" : "it ran my job")),
    el("td", {}, idCode(x.job)),
    el("td", { class: "hide-narrow" }, x.gpu || "—"),
    el("td", { title: x.claimed !== undefined ? "the provider claimed " + fmtNum(x.claimed) : "" }, fmtNum(x.secs)),
    el("td", { class: "state state-" + x.state },
      x.state === "disputed" ? el("span", { class: "marker" }, "⚠ disputed") : x.state,
      x.problem ? el("div", { class: "muted small" }, x.problem) : null),
    el("td", { class: "hide-narrow" }, x.end ? fmtTime(x.end / 1000) : "—")));
}

// ---------- mesh: providers, their offers and trust

let meshAsked = false;

async function loadMesh() {
  const q = meshAsked ? "?refresh=0" : "";
  meshAsked = true;
  const [m, rep] = await Promise.all([api("/v1/mesh" + q), api("/v1/mesh/reputation" + q), loadNames()]);
  const t = m.totals || {};
  $("mesh-totals").textContent = (t.providers || 0) + " provider(s) answering: " + (t.gpus || 0) + " GPU(s), " +
    (t.free || 0) + " free, " + (t.queued || 0) + " job(s) queued.";
  const rows = (m.providers || []).map((p) => ({
    id: p.node_id, name: p.name || short(p.node_id), state: p.state, error: p.error || "",
    gpus: (p.gpus || []).map((g) => g.model + " " + fmtBytes(g.memory_bytes) + (g.claim && g.claim !== "unverified" ? " (" + g.claim + ")" : "")),
    free: p.free, total: p.gpus_total, queue: p.queue_depth, backends: (p.backends || []).join(", "),
    reputation: p.reputation,
  }));
  renderRows("mesh-table", "mesh-empty", rows, (p) => el("tr", { "data-provider": p.name },
    el("td", {}, el("strong", {}, p.name), el("br"), el("code", { class: "muted" }, short(p.id))),
    el("td", { class: p.state === "ok" ? "ok" : "bad" }, p.state, p.error ? el("div", { class: "muted small" }, p.error) : null),
    el("td", {}, p.gpus.length ? p.gpus.join(", ") : "—"),
    el("td", {}, p.total === undefined ? "—" : p.free + " / " + p.total),
    el("td", { class: "hide-narrow" }, p.queue ?? "—"),
    el("td", { class: "hide-narrow" }, p.backends || "—"),
    el("td", {}, p.reputation === undefined ? "—" : meter("", fmtNum(p.reputation, 2), 100 * p.reputation))));
  const trows = (rep.peers || []).map((p) => ({
    id: p.node_id, name: p.self ? "this node" : peerName(p.node_id), reputation: p.reputation, trust: p.trust,
    check: p.benchmark ? p.benchmark.outcome + ", " + fmtTime((p.benchmark.at_ms || 0) / 1000) : "",
    pre: (rep.pre_trusted || []).includes(p.node_id),
  })).sort((a, b) => b.reputation - a.reputation);
  renderRows("trust-table", "trust-empty", trows, (p) => el("tr", { "data-node": p.name },
    el("td", {}, el("strong", {}, p.name), p.pre ? el("span", { class: "muted small" }, " pre-trusted") : null),
    el("td", {}, meter("", fmtNum(p.reputation, 2), 100 * p.reputation)),
    el("td", { class: "hide-narrow" }, fmtNum(p.trust, 3)),
    el("td", {}, p.check || "none yet")));
}

// ---------- transfers: in progress, and the ones this page saw end

const TRANSFERS_KEY = "yonder.transfers";
const recentTransfers = new Map(JSON.parse(sessionStorage.getItem(TRANSFERS_KEY) || "[]"));
let liveTransfers = new Set();

async function loadTransfers() {
  const t = await api("/v1/transfers");
  const live = t.transfers || [];
  const now = new Set(live.map((x) => x.id));
  // The daemon keeps an ended transfer's outcome for a while, by id only.
  for (const id of liveTransfers) {
    if (now.has(id)) continue;
    const one = await api("/v1/transfers?id=" + encodeURIComponent(id)).catch(() => ({ transfers: [] }));
    const last = (one.transfers || [])[0] || { id, ended: true, outcome: "ended", phase: "done" };
    recentTransfers.set(id, last);
  }
  liveTransfers = now;
  const recent = [...recentTransfers.values()].filter((x) => !now.has(x.id)).slice(-20);
  sessionStorage.setItem(TRANSFERS_KEY, JSON.stringify(recent.map((x) => [x.id, x])));
  const rows = [...live, ...recent.reverse()].map((x) => ({
    id: x.id, kind: x.kind, peer: x.peer || (x.job_id ? "job " + short(x.job_id) : "—"), dir: x.dir || "",
    phase: x.phase, ended: !!x.ended, outcome: x.outcome || "", error: x.error || "", cancelling: !!x.cancel_requested,
    done: x.phase === "hashing" ? x.hashed_bytes : x.kind === "download" ? x.bytes : x.sent_bytes,
    of: x.phase === "hashing" ? x.bytes : x.kind === "download" ? x.need_bytes || x.bytes : x.need_bytes,
  }));
  renderRows("transfer-table", "transfer-empty", rows, (x) => el("tr", { "data-transfer-id": x.id, class: x.ended ? "ended" : null },
    el("td", {}, el("code", { class: "id" }, x.id), el("div", { class: "muted small" }, x.kind)),
    el("td", {}, x.peer),
    el("td", { class: "hide-narrow" }, el("code", {}, x.dir)),
    el("td", {}, x.of ? meter("", fmtBytes(x.done || 0) + " / " + fmtBytes(x.of), (100 * (x.done || 0)) / x.of) : fmtBytes(x.done || 0)),
    el("td", { class: "state state-" + (x.ended ? x.outcome : x.phase) }, x.ended ? x.outcome : x.phase,
      x.error ? el("div", { class: "muted small" }, x.error) : null),
    el("td", {}, x.ended ? null : el("button", { class: "danger cancel", type: "button", disabled: x.cancelling,
      onclick: (ev) => cancelTransfer(x.id, ev.target) }, x.cancelling ? "Cancelling…" : "Cancel"))));
}

async function cancelTransfer(id, button) {
  button.disabled = true;
  try {
    await api("/v1/transfers/cancel", { id });
    showBanner("");
  } catch (e) {
    showBanner("Cancelling transfer " + id + " failed: " + e.message);
  }
  await loadTransfers();
}

// ---------- audit: names, details, refusals, filters

let auditEntries = [];

async function loadAudit() {
  const [a] = await Promise.all([api("/v1/audit?limit=200&verify=1"), loadNames()]);
  const v = a.verify || {};
  const p = $("audit-verify");
  p.className = v.ok ? "ok" : "bad";
  p.dataset.ok = String(!!v.ok);
  p.textContent = v.ok
    ? "Hash chain verified: " + v.entries + " entries, head " + (v.head_hash || "—").slice(0, 16)
    : "Hash chain verification FAILED" + (v.problem ? ": " + v.problem : v.error ? ": " + v.error : "") +
      " (`yonder audit --verify` names the entry)";
  auditEntries = (a.entries || []).slice().reverse();
  fillFilter("audit-peer", auditEntries.map((e) => e.actor), peerName);
  fillFilter("audit-action", auditEntries.map((e) => e.action), (x) => x);
  renderAudit();
}

// A refusal is recorded with detail.refused (why) and detail.code.
function refusal(e) { return e.detail && typeof e.detail === "object" && "refused" in e.detail; }

// The detail object as "key=value" pairs (the refusal is shown apart);
// Unix times ("..._at") as local times.
function compactDetail(d) {
  if (d === null || d === undefined) return "";
  if (typeof d !== "object") return String(d);
  return Object.entries(d).filter(([k]) => k !== "refused").map(([k, v]) => k + "=" +
    (k.endsWith("_at") && typeof v === "number" && v > 1e9 ? fmtTime(v) : typeof v === "string" ? v : JSON.stringify(v))).join(", ");
}

function fillFilter(id, values, label) {
  const sel = $(id);
  const keep = sel.value;
  const opts = [...new Set(values.filter(Boolean))].map((x) => [x, label(x)]).sort((a, b) => a[1].localeCompare(b[1]));
  const sig = JSON.stringify(opts);
  if (sel.dataset.sig === sig) return;
  sel.dataset.sig = sig;
  sel.replaceChildren(el("option", { value: "" }, "all"), ...opts.map(([v, l]) => el("option", { value: v }, l)));
  sel.value = opts.some(([v]) => v === keep) ? keep : "";
}

function renderAudit() {
  const peer = $("audit-peer").value, action = $("audit-action").value, onlyRefused = $("audit-refused").checked;
  const rows = auditEntries.filter((e) => (!peer || e.actor === peer) && (!action || e.action === action) &&
                                          (!onlyRefused || refusal(e))).map((e) => ({
    seq: e.seq, at: e.at, actor: e.actor, who: peerName(e.actor), action: e.action, subject: e.subject,
    refused: refusal(e) ? String(e.detail.refused) : null, detail: compactDetail(e.detail), raw: JSON.stringify(e.detail),
  }));
  $("audit-empty").hidden = auditEntries.length > 0;
  renderRows("audit-table", null, rows, (r) => el("tr",
    { "data-seq": String(r.seq), "data-action": r.action, "data-actor": r.actor, class: r.refused !== null ? "refused" : null },
    el("td", {}, r.seq), el("td", {}, fmtTime(r.at)),
    el("td", { title: r.actor }, r.who),
    el("td", {}, r.action, r.refused !== null ? el("span", { class: "marker refused-mark" }, "refused") : null),
    el("td", { class: "hide-narrow" }, !r.subject ? "" : names.has(r.subject) ? names.get(r.subject) : idCode(r.subject)),
    el("td", { class: "detail", title: r.raw },
      r.refused !== null ? el("strong", { class: "bad" }, "Refused: " + r.refused + (r.detail ? " · " : "")) : null,
      el("span", {}, r.detail.length > 200 ? r.detail.slice(0, 197) + "…" : r.detail))));
}

// ---------- tabs and polling

const loaders = {
  status: loadStatus, gpus: loadGpus, peers: loadPeers, links: loadLinks, jobs: loadJobs,
  credits: loadCredits, mesh: loadMesh, transfers: loadTransfers, audit: loadAudit,
};
const CHART_TABS = new Set(["gpus", "peers", "jobs"]);

function currentTab() {
  const t = location.hash.replace("#", "");
  return loaders[t] ? t : "status";
}

function showTab() {
  const tab = currentTab();
  for (const s of document.querySelectorAll("[data-section]")) s.hidden = s.dataset.section !== tab;
  for (const a of document.querySelectorAll("#tabs a")) a.classList.toggle("active", a.dataset.tab === tab);
  $("range").hidden = !CHART_TABS.has(tab);
  if (tab === "credits") creditsFetched = false;
  if (tab === "mesh") meshAsked = false;
  refresh();
}

let refreshing = false;
let again = false;
async function refresh() {
  if (refreshing) { again = true; return; }
  refreshing = true;
  try {
    const tab = currentTab();
    if (CHART_TABS.has(tab) && typeof uPlot !== "function") throw new Error("the chart library (/assets/uplot.js) did not load; reload the page");
    await loaders[tab]();
    if (tab === currentTab()) document.body.dataset.loaded = tab;
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) showBanner("yonderd did not answer: " + e.message + " (is it running? `yonder status`)");
  } finally {
    refreshing = false;
    if (again) { again = false; refresh(); }
  }
}

document.addEventListener("DOMContentLoaded", () => {
  capabilityBoxes($("link-form").querySelector(".caps"));
  capabilityBoxes($("scope-form").querySelector(".caps"));
  $("link-form").addEventListener("submit", newLink);
  $("link-copy").addEventListener("click", copyLink);
  $("scope-form").addEventListener("submit", saveScope);
  $("scope-cancel").addEventListener("click", () => { $("scope-form").hidden = true; });
  $("mesh-refresh").addEventListener("click", () => { meshAsked = false; refresh(); });
  for (const id of ["audit-peer", "audit-action", "audit-refused"]) $(id).addEventListener("change", renderAudit);
  for (const b of document.querySelectorAll("#range button")) {
    b.addEventListener("click", () => setRange(Number(b.dataset.range)));
    b.classList.toggle("active", Number(b.dataset.range) === rangeS);
  }
  window.addEventListener("hashchange", showTab);
  api("/v1/status").then(showSelf).catch(() => {});
  showTab();
  setInterval(refresh, POLL_MS);
});
