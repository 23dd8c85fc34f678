// Yonder dashboard: the charts (uPlot, /assets/uplot.js) of the node's
// stored history (GET /v1/history, src/history). Loaded before app.js as a
// classic script: its functions and constants are globals that app.js uses
// (and it uses app.js's helpers, api() and el(), when called).
"use strict";

// ---------- stored history and charts

const RANGES = new Set([900, 3600, 86400]);
let rangeS = RANGES.has(Number(localStorage.getItem("yonder.range"))) ? Number(localStorage.getItem("yonder.range")) : 3600;
let historyInfo = null;  // {interval_s, keep_s}, or {missing: message}
const historyCache = new Map();  // query -> {at, series}
const plots = new WeakMap();  // chart box -> {u, sig}

// Series of GET /v1/history for `query` (prefix= or series=) over the
// chosen range; asked again at most once per sampling interval.
async function history(query) {
  const every = Math.max(POLL_MS, 1000 * ((historyInfo && historyInfo.interval_s) || 0)) - 200;
  const hit = historyCache.get(query);
  if (hit && Date.now() - hit.at < every) return hit.series;
  const points = Math.min(300, Math.max(60, Math.floor(window.innerWidth / 3)));
  const since = Math.floor(Date.now() / 1000) - rangeS;
  let h;
  try {
    h = await api("/v1/history?" + query + "&since=" + since + "&points=" + points);
  } catch (e) {
    if (!(e instanceof ApiError) || e.status !== 404) throw e;
    historyInfo = { missing: "this yonderd stores no history (no GET /v1/history); update it to see charts" };
    showHistoryNote();
    return [];
  }
  historyInfo = { interval_s: h.interval_s, keep_s: h.keep_s };
  showHistoryNote();
  historyCache.set(query, { at: Date.now(), series: h.series || [] });
  return h.series || [];
}

function showHistoryNote() {
  const n = $("history-note");
  if (!historyInfo) n.textContent = "";
  else if (historyInfo.missing) n.textContent = historyInfo.missing;
  else n.textContent = "sampled every " + historyInfo.interval_s + " s, kept " + fmtDuration(historyInfo.keep_s);
}

function setRange(s) {
  rangeS = s;
  localStorage.setItem("yonder.range", String(s));
  historyCache.clear();
  for (const b of document.querySelectorAll("#range button")) b.classList.toggle("active", Number(b.dataset.range) === s);
  refresh();
}

function unitFormat(unit) {
  if (unit === "bytes") return fmtBytes;
  if (unit === "bytes/s") return (v) => fmtBytes(v) + "/s";
  return (v) => v.toFixed(v > 0 && v < 10 ? 1 : 0) + " " + unit;
}

// [xs, ys...] for uPlot from several series' [[t, v], ...]: one x axis
// over all their times, null where a series has no point.
function aligned(pointLists) {
  const ts = [...new Set(pointLists.flatMap((p) => p.map((q) => q[0])))].sort((a, b) => a - b);
  const at = new Map(ts.map((t, i) => [t, i]));
  return [ts, ...pointLists.map((pts) => {
    const ys = new Array(ts.length).fill(null);
    for (const [t, v] of pts) ys[at.get(t)] = v;
    return ys;
  })];
}

// Binary steps for byte axes, so ticks read 8 GiB, 16 GiB rather than 18.6.
const BYTE_INCRS = [1, 2 ** 10, 2 ** 20, 2 ** 30, 2 ** 40].flatMap((p) => [1, 2, 4, 8, 16, 32, 64, 128, 256, 512].map((m) => m * p));

// The chart box for `key` inside `host` (made if missing, in order): a
// title line with the values (the latest, or under the cursor), the plot.
function chartBox(host, key, title) {
  let box = [...host.children].find((c) => c.dataset.chart === key);
  if (!box) {
    box = el("div", { class: "chart", "data-chart": key },
      el("div", { class: "chart-title" }, el("span", { class: "chart-name" }), el("span", { class: "chart-values" })),
      el("div", { class: "chart-plot" }));
    host.append(box);
    new ResizeObserver(() => {
      const p = plots.get(box);
      if (p && box.clientWidth > 0 && Math.abs(p.u.width - box.clientWidth) > 2) p.u.setSize({ width: box.clientWidth, height: CHART_HEIGHT });
    }).observe(box);
  }
  box.querySelector(".chart-name").textContent = title;
  return box;
}

// The values of the chart's lines at the cursor, or their latest values,
// in its title line (in place of uPlot's legend table, too wide on a phone).
function showValues(box, u, fmt, labels) {
  const idx = u.cursor.idx;
  const parts = labels.map((label, i) => {
    const ys = u.data[i + 1] || [];
    let v = idx === null || idx === undefined ? null : ys[idx];
    for (let j = ys.length - 1; (idx === null || idx === undefined) && j >= 0 && (v === null || v === undefined); j--) v = ys[j];
    const swatch = el("i", { class: "swatch" });
    swatch.style.background = COLORS[i % COLORS.length];
    return el("span", {}, swatch, (labels.length > 1 ? label + " " : "") + (v === null || v === undefined ? "—" : fmt(v)));
  });
  if (idx !== null && idx !== undefined && u.data[0][idx]) {
    parts.unshift(el("span", { class: "muted" }, new Date(u.data[0][idx] * 1000).toLocaleTimeString()));
  }
  box.querySelector(".chart-values").replaceChildren(...parts);
}

// Draws `lines` ([{label, points}]) in `box`: a new uPlot when the shape
// changed, new data otherwise. `yRange`: [min, max] or null (from 0 up).
function drawChart(box, unit, lines, yRange) {
  const data = aligned(lines.map((l) => l.points));
  const fmt = unitFormat(unit);
  const sig = JSON.stringify([unit, lines.map((l) => l.label), yRange]);
  box.dataset.points = String(data[0].length);
  if (box.dataset.firstPoints === undefined) box.dataset.firstPoints = String(data[0].length);
  const labels = lines.map((l) => l.label);
  const old = plots.get(box);
  if (old && old.sig === sig) {
    old.u.setData(data);
    showValues(box, old.u, fmt, labels);
    return;
  }
  if (old) old.u.destroy();
  const bytes = unit.startsWith("bytes");
  const opts = {
    width: Math.max(160, box.clientWidth || box.parentElement.clientWidth || 300), height: CHART_HEIGHT,
    cursor: { drag: { x: false, y: false } },
    legend: { show: false },
    scales: { y: { range: yRange ? () => yRange : (u, min, max) => [0, max > 0 ? max * 1.15 : 1] } },
    axes: [
      { stroke: "#6b6b73", grid: { stroke: "#ececf0" }, ticks: { stroke: "#dcdce0" } },
      { stroke: "#6b6b73", grid: { stroke: "#ececf0" }, ticks: { stroke: "#dcdce0" }, incrs: bytes ? BYTE_INCRS : undefined,
        values: (u, splits) => splits.map(fmt),
        // Wide enough for the longest tick label ("1023.5 MiB/s").
        size: (u, values) => 22 + 7 * Math.max(3, ...(values || []).map((v) => String(v).length)) }],
    series: [{}, ...lines.map((l, i) => ({
      label: l.label, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: true,
      fill: lines.length === 1 ? COLORS[i] + "22" : undefined }))],
    hooks: { setCursor: [(u) => showValues(box, u, fmt, labels)] },
  };
  const u = new uPlot(opts, data, box.lastChild);
  plots.set(box, { u, sig });
  showValues(box, u, fmt, labels);
}

// Removes chart boxes of `host` whose key is not in `keep`.
function dropCharts(host, keep) {
  for (const box of [...host.children]) {
    if (box.dataset.chart && keep.has(box.dataset.chart)) continue;
    const p = plots.get(box);
    if (p) p.u.destroy();
    box.remove();
  }
}

function byName(series) { return new Map(series.map((s) => [s.name, s])); }
