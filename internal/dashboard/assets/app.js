// flashmend dashboard: polls /api/state each second, draws the cluster
// map, the totals, rates over time (from successive polls), the repair
// latency histogram and the repairs by kind. Plain JavaScript, no
// dependencies.
"use strict";

const history = []; // {t, readErrors, repairs}
const maxPoints = 120;

function fmt(n) {
  if (n >= 1e9) return (n / 1e9).toFixed(1) + "G";
  if (n >= 1e6) return (n / 1e6).toFixed(1) + "M";
  if (n >= 1e4) return (n / 1e3).toFixed(1) + "k";
  return String(Math.round(n));
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + units[i];
}

function el(tag, attrs, text) {
  const e = document.createElement(tag);
  for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}

function svgEl(tag, attrs) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  return e;
}

function setText(id, text) {
  document.getElementById(id).textContent = text;
}

function drawNodes(nodes) {
  const box = document.getElementById("nodes");
  box.textContent = "";
  let maxErase = 1;
  for (const n of nodes) for (const e of n.die_erases || []) maxErase = Math.max(maxErase, e);
  for (const n of nodes) {
    const card = el("div", { class: "node" + (n.degraded ? " degraded" : ""), "data-node": n.node });
    const title = el("div", { class: "title" });
    title.append(el("span", {}, "node " + n.node), el("span", { class: "meta" }, n.raft_leaders ? n.raft_leaders + " raft leader" + (n.raft_leaders > 1 ? "s" : "") : ""));
    card.append(title);
    const dies = el("div", { class: "dies" });
    (n.die_erases || []).forEach((e, i) => {
      const shade = Math.round(230 - 190 * (e / maxErase));
      const d = el("div", { class: "die", title: "die " + i + ": " + e + " erases" });
      d.style.background = "rgb(" + shade + "," + Math.round(shade * 0.9) + ",255)";
      d.textContent = e ? fmt(e) : "";
      dies.append(d);
    });
    if (!(n.die_erases || []).length) dies.append(el("div", { class: "meta" }, "plain files: no flash wear"));
    card.append(dies);
    card.append(el("div", { class: "meta" }, bytes(n.used_bytes) + " of " + bytes(n.capacity_bytes) + " used"));
    card.append(el("div", { class: "meta" }, "read errors " + fmt(n.read_errors) + " · repairs " + fmt(n.repairs) +
      (n.failed_dies ? " · ✕ " + n.failed_dies + " failed die" + (n.failed_dies > 1 ? "s" : "") : "")));
    box.append(card);
  }
}

function drawRates() {
  const svg = document.getElementById("rates");
  svg.textContent = "";
  const pts = [];
  for (let i = 1; i < history.length; i++) {
    const a = history[i - 1], b = history[i], dt = (b.t - a.t) / 1000 || 1;
    pts.push({ err: Math.max(0, (b.readErrors - a.readErrors) / dt), rep: Math.max(0, (b.repairs - a.repairs) / dt) });
  }
  let top = 1;
  for (const p of pts) top = Math.max(top, p.err, p.rep);
  const line = (key, color) => {
    const d = pts.map((p, i) => (400 * i / (maxPoints - 1)).toFixed(1) + "," + (155 - 150 * p[key] / top).toFixed(1)).join(" ");
    svg.append(svgEl("polyline", { points: d, fill: "none", stroke: color, "stroke-width": 2 }));
  };
  line("err", "#e67e22");
  line("rep", "#2980b9");
  const t = svgEl("text", { x: 4, y: 12, "font-size": 10, fill: "#667" });
  t.textContent = "max " + top.toFixed(1) + "/s";
  svg.append(t);
}

function drawLatency(h) {
  const svg = document.getElementById("latency");
  svg.textContent = "";
  const b = h.buckets || [];
  let prev = 0, top = 1;
  const counts = b.map(x => { const c = x.count - prev; prev = x.count; top = Math.max(top, c); return c; });
  const w = 400 / Math.max(1, b.length);
  counts.forEach((c, i) => {
    const hgt = 150 * c / top;
    const r = svgEl("rect", { x: i * w + 1, y: 155 - hgt, width: w - 2, height: hgt, fill: "#2980b9" });
    const tip = svgEl("title", {});
    tip.textContent = "≤ " + (b[i].le * 1000).toPrecision(3) + " ms: " + c;
    r.append(tip);
    svg.append(r);
  });
  setText("latency-summary", h.count ? h.count + " repairs, mean " + (1000 * h.sum_seconds / h.count).toFixed(2) + " ms" : "no repairs yet");
  const axis = document.getElementById("latency-axis");
  axis.textContent = b.length ? (b[0].le * 1000).toPrecision(2) + " ms … " + (b[b.length - 1].le * 1000).toPrecision(3) + " ms (log buckets)" : "";
}

function drawKinds(kinds) {
  const t = document.getElementById("kinds");
  t.textContent = "";
  for (const k of Object.keys(kinds).sort()) {
    const tr = el("tr", { "data-kind": k });
    tr.append(el("td", {}, k), el("td", { class: "n" }, fmt(kinds[k])));
    t.append(tr);
  }
}

async function poll() {
  try {
    const r = await fetch("api/state", { cache: "no-store" });
    const s = await r.json();
    history.push({ t: s.time_ms, readErrors: s.totals.read_errors, repairs: s.totals.repairs });
    while (history.length > maxPoints) history.shift();
    setText("total-read-errors", fmt(s.totals.read_errors));
    setText("total-repairs", fmt(s.totals.repairs));
    setText("total-repair-bytes", bytes(s.totals.repair_bytes));
    setText("total-die-failures", fmt(s.totals.die_failures));
    setText("total-requests", fmt(s.totals.requests));
    setText("objects", s.objects ? fmt(s.objects.REP || 0) + " / " + fmt(s.objects.EC || 0) : "n/a");
    drawNodes(s.nodes || []);
    drawRates();
    drawLatency(s.repair_latency || {});
    drawKinds(s.repairs_by_kind || {});
    document.getElementById("errors").textContent = (s.errors || []).join("; ");
    setText("status", "updated " + new Date(s.time_ms).toLocaleTimeString() + " · " + (s.nodes || []).length + " nodes");
    document.body.dataset.polls = String((Number(document.body.dataset.polls) || 0) + 1);
  } catch (e) {
    setText("status", "no answer: " + e);
  }
  setTimeout(poll, 1000);
}

poll();
