// weir serve's page: one selection (a time window and a tcpdump filter,
// kept in the address) drives every part. No framework: fetch, SVG, tables.
"use strict";

const NS_PER_S = 1e9;
const sel = { from: null, to: null, filter: "" };
const zooms = [];
let info = null;
let measure = "frames";
let flowSort = { col: "fwd_bytes", order: "desc" };
let flowPage = 0;
let packetPage = 0;
let lastOverview = null;
let lastSpanEnd = null;
let generation = 0;
let pending = 1;

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) e.append(c);
  return e;
}

function svgEl(tag, attrs) {
  const e = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

// ---- the selection and the address ----

function readAddress() {
  const p = new URLSearchParams(location.search);
  sel.from = p.get("from") ? BigInt(p.get("from")) : null;
  sel.to = p.get("to") ? BigInt(p.get("to")) : null;
  sel.filter = p.get("filter") || "";
  $("filter").value = sel.filter;
}

function selParams(extra) {
  const p = new URLSearchParams();
  if (sel.from !== null) p.set("from", sel.from.toString());
  if (sel.to !== null) p.set("to", sel.to.toString());
  if (sel.filter) p.set("filter", sel.filter);
  for (const [k, v] of Object.entries(extra || {})) p.set(k, String(v));
  return p;
}

function writeAddress() {
  const q = selParams().toString();
  history.replaceState(null, "", q ? "?" + q : location.pathname);
}

function setSelection(from, to, filter) {
  sel.from = from;
  sel.to = to;
  if (filter !== undefined) {
    sel.filter = filter;
    $("filter").value = filter;
  }
  flowPage = 0;
  packetPage = 0;
  writeAddress();
  refresh();
}

// ---- fetching ----

async function api(path, params, init) {
  const url = path + (params ? "?" + params.toString() : "");
  const r = await fetch(url, Object.assign({ credentials: "same-origin" }, init || {}));
  let body;
  try {
    body = await r.json();
  } catch (e) {
    body = { error: "the server sent no JSON (" + r.status + ")", kind: "server" };
  }
  if (!r.ok) {
    const err = new Error(body.error || "HTTP " + r.status);
    err.kind = body.kind;
    throw err;
  }
  return body;
}

function track(promise) {
  pending++;
  document.body.dataset.pending = String(pending);
  $("status").textContent = "loading";
  return promise.finally(() => {
    pending--;
    document.body.dataset.pending = String(pending);
    if (pending === 0) $("status").textContent = info && anyRunning() ? "live" : "ready";
  });
}

function anyRunning() {
  return info.datasets.some((d) => d.running);
}

// ---- formatting: as the terminal's tables (crates/query/analyze/src/
// terminal.rs), by each column's unit and rank that the API sends ----

function fmtTime(ns) {
  const n = BigInt(ns);
  const ms = Number(n / 1000000n);
  const rest = Number(n % 1000000n).toString().padStart(6, "0");
  return new Date(ms).toISOString().replace("T", " ").replace("Z", "") + rest + "Z";
}

function fmtShortTime(ns) {
  return new Date(Number(ns) / 1e6).toISOString().substring(11, 23);
}

function fmtDuration(ns) {
  const n = Number(ns);
  if (Math.abs(n) >= NS_PER_S) return (n / NS_PER_S).toFixed(3) + " s";
  if (Math.abs(n) >= 1e6) return (n / 1e6).toFixed(3) + " ms";
  if (Math.abs(n) >= 1e3) return (n / 1e3).toFixed(3) + " us";
  return n + " ns";
}

// A round length as people write it (50 ms, 15 s, 10 min); others as
// fmtDuration gives them.
function shortDuration(ns) {
  const n = Number(ns);
  const units = [[86400e9, "d"], [3600e9, "h"], [60e9, "min"], [1e9, "s"], [1e6, "ms"], [1e3, "us"]];
  for (const [unit, name] of units) {
    if (n >= unit) {
      const v = n / unit;
      const frac = String(v).split(".")[1];
      if (n % Math.max(1, unit / 1000) === 0 && (!frac || frac.length <= 3)) return `${v} ${name}`;
      break;
    }
  }
  return fmtDuration(n);
}

function si(v) {
  const n = Number(v);
  const units = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [d, u] of units) if (Math.abs(n) >= d) return (n / d).toFixed(2) + " " + u;
  return Number.isInteger(n) ? String(n) : n.toFixed(2);
}

function threeDigits(v) {
  if (Number.isInteger(v) && Math.abs(v) < 1000) return String(v);
  const a = Math.abs(v);
  return v.toFixed(a >= 100 ? 0 : a >= 10 ? 1 : 2);
}

// 1.23 Mb/s: three significant digits, an SI prefix and the unit.
function withUnit(x, unit) {
  const n = Number(x);
  for (const [d, p] of [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
    if (Math.abs(n) >= d * 0.9995) return `${threeDigits(n / d)} ${p}${unit}`;
  }
  return `${threeDigits(n)} ${unit}`;
}

// Bytes in B/kB/MB/GB (decimal, as networks count).
function humanBytes(v) {
  const n = Number(v);
  if (n < 1e3) return `${n} B`;
  if (n < 1e6) return `${(n / 1e3).toFixed(1)} kB`;
  if (n < 1e9) return `${(n / 1e6).toFixed(1)} MB`;
  return `${(n / 1e9).toFixed(2)} GB`;
}

function groupDigits(v) {
  const s = String(v);
  if (!/^\d+$/.test(s)) return s;
  return s.replace(/\B(?=(\d{3})+$)/g, ",");
}

function tcpFlags(f) {
  const bits = [[0x02, "S"], [0x01, "F"], [0x04, "R"], [0x08, "P"], [0x10, "."], [0x20, "U"], [0x40, "E"], [0x80, "W"]];
  return bits.filter(([b]) => f & b).map(([, c]) => c).join("");
}

const PROTOCOLS = { 1: "icmp", 2: "igmp", 6: "tcp", 17: "udp", 47: "gre", 50: "esp", 58: "icmpv6", 132: "sctp" };

// Where times in tables count from: the window's start.
function windowStart() {
  if (sel.from !== null) return sel.from;
  const span = info && info.span;
  return span ? BigInt(span.first_ns) : null;
}

// `+1.234 s` after the window's start; finer for a short window.
function secondsAfter(ns) {
  const t0 = windowStart();
  if (t0 === null) return fmtTime(ns);
  const d = Number(BigInt(ns) - t0) / NS_PER_S;
  const span = info && info.span ? Number(BigInt(info.span.last_ns) - t0) / NS_PER_S : 100;
  const digits = (sel.to !== null ? Number(sel.to - t0) / NS_PER_S : span) < 10 ? 6 : 3;
  return (d < 0 ? "-" : "+") + Math.abs(d).toFixed(digits) + " s";
}

const isInteger = (v) => typeof v === "number" || /^-?\d+$/.test(String(v));

// A cell's text (and the full value on hover, where the text shortens it).
function cell(unit, v) {
  if (v === undefined || v === null) return { text: "" };
  if (Array.isArray(v)) return { text: "[" + v.join(", ") + "]" };
  if (typeof v === "number" || isInteger(v)) {
    switch (unit) {
      case "time": return { text: secondsAfter(v), title: fmtTime(v) };
      case "duration": return { text: shortDuration(v), title: `${groupDigits(v)} ns` };
      case "b/s": case "fr/s": return { text: withUnit(v, unit) };
      case "tcp_flags": return { text: tcpFlags(Number(v)) };
      case "protocol": return { text: PROTOCOLS[Number(v)] || String(v) };
      case "bytes": return { text: humanBytes(v), title: `${groupDigits(v)} bytes` };
      case "count": return { text: groupDigits(v) };
      case "decimal": return { text: threeDigits(Number(v)) };
    }
  }
  if (typeof v === "number" && !Number.isInteger(v)) return { text: threeDigits(v) };
  return { text: String(v) };
}

// `a:p`, an IPv6 address in brackets; the address alone without a port.
function endpoint(addr, port) {
  const a = addr === undefined || addr === null ? "-" : String(addr);
  if (port === undefined || port === null) return a;
  return a.includes(":") ? `[${a}]:${port}` : `${a}:${port}`;
}

// The columns as shown: a flow's endpoints joined into `a:p → b:q`, a
// pair of hosts into `a ↔ b`; each with its rank (0: kept longest).
function shownColumns(t) {
  const cols = t.columns;
  const unit = (c) => (t.units ? t.units[cols.indexOf(c)] : "plain");
  const rank = (c) => (t.ranks ? t.ranks[cols.indexOf(c)] : 1);
  const used = new Set();
  const joined = {};
  if (cols.includes("src") && cols.includes("dst")) {
    const sp = cols.includes("src_port") ? "src_port" : null;
    const dp = cols.includes("dst_port") ? "dst_port" : null;
    for (const c of ["src", "dst", sp, dp]) if (c) used.add(c);
    joined.src = {
      col: "flow", header: "flow", rank: 0, right: false,
      show: (r) => ({ text: `${endpoint(r.src, sp && r[sp])} → ${endpoint(r.dst, dp && r[dp])}` }),
    };
  }
  if (cols.includes("host_a") && cols.includes("host_b")) {
    used.add("host_a");
    used.add("host_b");
    joined.host_a = { col: "hosts", header: "hosts", rank: 0, right: false, show: (r) => ({ text: `${r.host_a ?? "-"} ↔ ${r.host_b ?? "-"}` }) };
  }
  const out = [];
  for (const c of cols) {
    if (joined[c]) out.push(joined[c]);
    if (used.has(c)) continue;
    const u = unit(c);
    const numeric = t.rows.some((r) => typeof r[c] === "number");
    out.push({
      col: c,
      header: u === "time" || u === "duration" ? c.replace(/_ns$/, "") : c,
      unit: u,
      rank: rank(c),
      right: numeric && !["tcp_flags", "protocol"].includes(u) && !/(^|_)port$/.test(c),
      show: (r) => cell(u, r[c]),
    });
  }
  return out;
}

// ---- tables ----

// Columns the reader chose to see in full, by table.
const expanded = {};
// The tables drawn, to lay them out again when the window changes size.
const drawn = {};

// A table of {columns, units, ranks, rows}: `opts.sortable` makes headers
// sort, and `opts.onRow` makes rows clickable. It fits its box: the least
// telling columns are left out (rightmost first) until it does, behind a
// "more columns" button.
function renderTable(target, t, opts) {
  opts = opts || {};
  drawn[target] = [t, opts];
  const box = $(target);
  box.replaceChildren();
  if (!t.rows.length) {
    box.append(el("p", { class: "hint" }, "no rows"));
    return;
  }
  const cols = shownColumns(t);
  const head = el("tr");
  for (const c of cols) {
    const th = el("th", { "data-col": c.col, "data-unit": c.unit || "" }, c.header);
    if (!c.right) th.classList.add("text");
    if (c.unit === "time") th.title = "seconds after the window's start";
    if (opts.sortable && c.unit) {
      th.classList.add("sortable");
      if (opts.sort && opts.sort.col === c.col) th.classList.add("sorted-" + opts.sort.order);
      th.addEventListener("click", () => opts.sortable(c.col));
    }
    head.append(th);
  }
  const body = el("tbody");
  for (const r of t.rows) {
    const tr = el("tr");
    for (const c of cols) {
      const v = c.show(r);
      const td = el("td", {}, v.text);
      if (v.title) td.title = v.title;
      if (c.unit && r[c.col] !== undefined && r[c.col] !== null) td.dataset.value = String(r[c.col]);
      if (!c.right) td.classList.add("text");
      tr.append(td);
    }
    if (opts.onRow) tr.addEventListener("click", () => opts.onRow(r, tr));
    body.append(tr);
  }
  const table = el("table", {}, el("thead", {}, head), body);
  box.append(table);
  const hidden = expanded[target] ? [] : fit(box, table, cols);
  if (hidden.length || expanded[target]) {
    const more = el("button", { type: "button", class: "more-columns" },
      expanded[target] ? "fewer columns" : `more columns (${hidden.length})`);
    if (hidden.length) more.title = hidden.join(", ");
    more.addEventListener("click", () => {
      expanded[target] = !expanded[target];
      renderTable(target, t, opts);
    });
    box.append(more);
  }
  if (t.truncated) box.append(el("p", { class: "truncated" }, "more rows than shown (the server's row limit)"));
}

// Hides columns, highest rank and rightmost first (never the first), until
// `table` is no wider than `box`; returns their headers.
function fit(box, table, cols) {
  const room = box.clientWidth;
  if (!room) return [];
  const order = cols.map((_, i) => i).slice(1).sort((a, b) => cols[b].rank - cols[a].rank || b - a);
  const hidden = [];
  for (const i of order) {
    if (table.offsetWidth <= room) break;
    for (const row of table.rows) row.cells[i].hidden = true;
    hidden.push(i);
  }
  return hidden.sort((a, b) => a - b).map((i) => cols[i].header);
}

let refit = null;
window.addEventListener("resize", () => {
  clearTimeout(refit);
  refit = setTimeout(() => {
    for (const [target, [t, opts]] of Object.entries(drawn)) if ($(target)) renderTable(target, t, opts);
  }, 150);
});

function renderTables(target, answer) {
  const box = $(target);
  box.replaceChildren();
  for (const t of answer.tables) {
    const id = target + "-" + t.name;
    if (answer.tables.length > 1) box.append(el("h3", { class: "hint" }, t.name));
    box.append(el("div", { id: id, class: "table" }));
    renderTable(id, t);
  }
  if (answer.how) box.append(el("p", { class: "hint" }, answer.how));
}

// A panel's request: its box dimmed and "loading" beside its title while
// it runs, then the time the answer took.
function timed(target, promise) {
  const box = $(target);
  const took = $(target + "-took");
  const t0 = performance.now();
  box.classList.add("loading");
  if (took) {
    took.textContent = "loading …";
    took.dataset.state = "loading";
  }
  const done = (what) => {
    box.classList.remove("loading");
    if (took) {
      const ms = performance.now() - t0;
      took.textContent = `${what} in ${ms < 1000 ? Math.round(ms) + " ms" : (ms / 1000).toFixed(2) + " s"}`;
      took.dataset.state = what;
    }
  };
  return track(promise).then(
    (v) => {
      done("answered");
      return v;
    },
    (e) => {
      done("failed");
      throw e;
    }
  );
}

function showError(target, e) {
  const box = $(target);
  box.replaceChildren(el("p", { class: "error" }, e.message));
}

function pager(target, page, per, total, go) {
  const box = $(target);
  box.replaceChildren();
  const pages = Math.max(1, Math.ceil(total / per));
  const prev = el("button", { type: "button", disabled: page === 0 }, "previous");
  const next = el("button", { type: "button", disabled: page + 1 >= pages }, "next");
  prev.addEventListener("click", () => go(page - 1));
  next.addEventListener("click", () => go(page + 1));
  box.append(prev, el("span", { class: "hint" }, `page ${page + 1} of ${pages} (${groupDigits(total)} rows)`), next);
}

// ---- the overview ----

function drawOverview(ov) {
  lastOverview = ov;
  const box = $("overview");
  box.replaceChildren();
  const W = Math.max(300, box.clientWidth || 900);
  const H = 180, top = 8, bottom = 20, left = 50;
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none" });
  box.append(svg);
  if (ov.empty) {
    const t = svgEl("text", { x: left, y: H / 2 });
    t.textContent = "no frames in the window";
    svg.append(t);
    return;
  }
  const from = Number(ov.from_ns), to = Number(ov.to_ns), bucket = Number(ov.bucket_ns);
  const x = (t) => left + ((t - from) / (to - from)) * (W - left - 4);
  const vals = ov.traffic[measure];
  const max = Math.max(1, ...vals);
  const y = (v) => top + (1 - v / max) * (H - top - bottom);
  svg.append(svgEl("line", { class: "axis", x1: left, y1: H - bottom, x2: W, y2: H - bottom }));
  ov.traffic.t.forEach((t, i) => {
    const x0 = x(Math.max(t, from)), x1 = x(Math.min(t + bucket, to));
    svg.append(svgEl("rect", { class: "bar", x: x0, y: y(vals[i]), width: Math.max(0.5, x1 - x0 - 0.3), height: H - bottom - y(vals[i]) }));
  });
  // Drops per stage, as marks under the axis: any drop is shown.
  let drops = 0;
  ov.stats.t.forEach((t, i) => {
    const d = ov.stats.kernel_drops[i] + ov.stats.pcap_drops[i] + ov.stats.queue_freezes[i];
    if (d > 0) {
      drops += d;
      const x0 = x(Math.max(t, from)), x1 = x(Math.min(t + bucket, to));
      const r = svgEl("rect", { class: "drop", x: x0, y: H - bottom + 2, width: Math.max(2, x1 - x0), height: 6 });
      const tip = svgEl("title");
      tip.textContent = `${fmtTime(t)}: kernel ${ov.stats.kernel_drops[i]}, pcap ${ov.stats.pcap_drops[i]}, queue freezes ${ov.stats.queue_freezes[i]}`;
      r.append(tip);
      svg.append(r);
    }
  });
  const label = (text, xx, yy, anchor) => {
    const t = svgEl("text", { x: xx, y: yy, "text-anchor": anchor || "start" });
    t.textContent = text;
    svg.append(t);
  };
  label(measure === "bytes" ? humanBytes(max) : si(max), 2, top + 8);
  label("0", 2, H - bottom);
  label(fmtShortTime(from), left, H - 2);
  label(fmtShortTime(to), W - 4, H - 2, "end");
  const seen = ov.traffic[measure].reduce((a, b) => a + b, 0);
  $("overview-legend").textContent =
    `${measure === "bytes" ? humanBytes(seen) : groupDigits(seen) + " frames"} in ${shortDuration(to - from)}, bars of ${shortDuration(bucket)}; ` +
    (ov.stats.t.length ? `${drops} frames dropped (red marks: kernel, pcap, queue)` : "no capture stats (a conversion)");
  // Drag to zoom.
  const brush = svgEl("rect", { class: "brush", x: 0, y: top, width: 0, height: H - top - bottom, visibility: "hidden" });
  svg.append(brush);
  const toData = (ev) => {
    const r = svg.getBoundingClientRect();
    const px = ((ev.clientX - r.left) / r.width) * W;
    return { px, t: from + ((px - left) / (W - left - 4)) * (to - from) };
  };
  let start = null;
  svg.addEventListener("mousedown", (ev) => {
    start = toData(ev);
    brush.setAttribute("visibility", "visible");
    brush.setAttribute("x", start.px);
    brush.setAttribute("width", 0);
    ev.preventDefault();
  });
  svg.addEventListener("mousemove", (ev) => {
    if (!start) return;
    const p = toData(ev);
    brush.setAttribute("x", Math.min(start.px, p.px));
    brush.setAttribute("width", Math.abs(p.px - start.px));
  });
  const finish = (ev) => {
    if (!start) return;
    const p = toData(ev);
    const a = Math.max(from, Math.min(start.t, p.t)), b = Math.min(to, Math.max(start.t, p.t));
    start = null;
    brush.setAttribute("visibility", "hidden");
    if (b - a < 1000 || Math.abs(b - a) < (to - from) / 500) return;
    zooms.push([sel.from, sel.to]);
    setSelection(BigInt(Math.floor(a)), BigInt(Math.ceil(b)));
  };
  svg.addEventListener("mouseup", finish);
  svg.addEventListener("mouseleave", () => {
    start = null;
    brush.setAttribute("visibility", "hidden");
  });
  svg.addEventListener("dblclick", zoomOut);
}

function zoomOut() {
  if (zooms.length) {
    const [f, t] = zooms.pop();
    setSelection(f, t);
  } else {
    setSelection(null, null);
  }
}

// ---- the parts ----

function windowText() {
  const span = info && info.span;
  const f = sel.from !== null ? sel.from : span ? span.first_ns : null;
  const t = sel.to !== null ? sel.to : null;
  let s = f !== null ? fmtTime(f) : "the start";
  s += " to " + (t !== null ? fmtTime(t) : span ? fmtTime(span.last_ns) + " (the last frame)" : "the end");
  if (sel.from === null && sel.to === null) s += ": the whole span";
  $("window-text").textContent = s;
}

function renderFacts() {
  const box = $("facts");
  box.replaceChildren();
  for (const d of info.datasets) {
    const dl = el("dl");
    const add = (k, v) => dl.append(el("dt", {}, k), el("dd", {}, v));
    add("dataset", `${d.name} (${d.kind}${d.running ? ", capture running" : ""})`);
    add("interfaces", d.interfaces.map((i) => `${i.name || "?"} (${i.link}, snaplen ${i.snaplen})`).join(", ") || "none");
    if (d.workers !== null && d.workers !== undefined) add("workers", String(d.workers));
    if (d.span) add("span", `${d.span.first} to ${d.span.last} (${fmtDuration(d.span.last_ns - d.span.first_ns)})`);
    add("frames", `${groupDigits(d.frames)} frames, ${humanBytes(d.wire_bytes)} on the wire`);
    if (d.drops) add("drops", `kernel ${groupDigits(d.drops.kernel)}, pcap ${groupDigits(d.drops.pcap)} of ${groupDigits(d.drops.kernel_seen)} the kernel saw`);
    if (d.capture_filter) add("capture filter", d.capture_filter);
    box.append(dl);
  }
  $("max-rows").textContent = String(info.limits.max_rows);
  $("rpc-box").hidden = !info.datasets.some((d) => d.has_rpc);
  $("stack-box").hidden = !info.datasets.some((d) => d.has_stack);
}

function loadIntegrity(fresh) {
  const box = $("integrity");
  box.replaceChildren(el("span", { class: "hint" }, "integrity: checking every file ..."));
  return timed("integrity",
    api("/api/verify", fresh ? new URLSearchParams({ fresh: "1" }) : null)).then(
      (v) => {
        box.replaceChildren();
        for (const d of v.datasets) {
          const r = d.report;
          // "unsigned", or {"valid": {"key": ...}} and the like.
          const sig = typeof r.signature === "string" ? r.signature
            : Object.keys(r.signature)[0] + " (key " + Object.values(r.signature)[0].key + ")";
          let text;
          if (d.ok) text = `verified: ${r.files} files, nothing missing, altered, truncated, reordered or added`;
          else text = `${r.findings.length} problem(s): ` + r.findings.map((f) => `${f.kind} ${f.path || ""} ${f.detail}`).join("; ");
          if (r.running) text += " (capture running: unfinished files are not in the chain yet)";
          box.append(el("p", { class: d.ok ? "ok" : "bad", "data-ok": String(d.ok) }, `integrity of ${d.dataset}: ${text}; seal ${r.seal}; signature ${sig}`));
        }
        const again = el("button", { type: "button" }, "verify again");
        again.addEventListener("click", () => loadIntegrity(true));
        box.append(again);
      },
      (e) => showError("integrity", e)
    );
}

function flowFilter(r) {
  const hosts = r.src === r.dst ? `host ${r.src}` : `host ${r.src} and host ${r.dst}`;
  const proto = r.proto === 6 ? "tcp" : r.proto === 17 ? "udp" : null;
  if (proto && r.src_port && r.dst_port) {
    const ports = r.src_port === r.dst_port ? `port ${r.src_port}` : `port ${r.src_port} and port ${r.dst_port}`;
    return `${proto} and ${hosts} and ${ports}`;
  }
  return hosts;
}

function loadFlows(gen) {
  const p = selParams({ page: flowPage, per: 25, sort: flowSort.col, order: flowSort.order });
  return timed("flows", api("/api/flows", p)).then(
      (t) => {
        if (gen !== generation) return;
        renderTable("flows", t, {
          sort: flowSort,
          sortable: (c) => {
            flowSort = { col: c, order: flowSort.col === c && flowSort.order === "desc" ? "asc" : "desc" };
            flowPage = 0;
            loadFlows(generation);
          },
          onRow: (r, tr) => {
            tr.classList.add("selected");
            zooms.push([sel.from, sel.to]);
            // The flow's own span, its last frame included.
            setSelection(BigInt(r.first_ns), BigInt(r.last_ns) + 1n, flowFilter(r));
          },
        });
        $("flows-how").textContent = t.how;
        pager("flows-pager", t.page, t.per, t.total, (pg) => {
          flowPage = pg;
          loadFlows(generation);
        });
      },
      (e) => showError("flows", e)
    );
}

function loadPackets(gen) {
  return timed("packets", api("/api/packets", selParams({ page: packetPage, per: 50 }))).then(
      (t) => {
        if (gen !== generation) return;
        renderTable("packets", t);
        pager("packets-pager", t.page, t.per, t.total, (pg) => {
          packetPage = pg;
          loadPackets(generation);
        });
      },
      (e) => showError("packets", e)
    );
}

function niceStep(atLeast) {
  let p = 1;
  for (;;) {
    for (const m of [1, 2, 5]) if (p * m >= atLeast) return p * m;
    p *= 10;
  }
}

function loadAnalysis(target, params, gen) {
  return timed(target, api("/api/analysis", selParams(params))).then(
    (a) => {
      if (gen === generation) renderTables(target, a);
    },
    (e) => showError(target, e)
  );
}

async function refresh() {
  const gen = ++generation;
  windowText();
  $("download").href = "/api/pcap?" + selParams().toString();
  $("filter-error").hidden = true;
  if (sel.filter) {
    try {
      await track(api("/api/check", selParams()));
    } catch (e) {
      $("filter-error").textContent = e.message;
      $("filter-error").hidden = false;
      $("filter-error").dataset.kind = e.kind || "";
      return;
    }
  }
  timed("overview", api("/api/overview", selParams())).then(
    (ov) => {
      if (gen === generation) drawOverview(ov);
    },
    (e) => showError("overview", e)
  );
  loadFlows(gen);
  loadPackets(gen);
  for (const what of ["hosts", "ports", "pairs"]) {
    loadAnalysis("top-" + what, { name: "top", what: what, limit: 10 }, gen);
  }
  const span = info && info.span;
  const f = sel.from !== null ? Number(sel.from) : span ? span.first_ns : 0;
  const t = sel.to !== null ? Number(sel.to) : span ? span.last_ns + 1 : f + NS_PER_S;
  const every = niceStep(Math.max(10, (t - f) / 40));
  loadAnalysis("rates", { name: "rates", every_ns: every, sample_ns: every / 10 }, gen);
  loadAnalysis("bursts", { name: "bursts" }, gen);
  loadAnalysis("loss", { name: "loss" }, gen);
  if (!$("rpc-box").hidden) loadAnalysis("rpc", { name: "rpc" }, gen);
  if (!$("stack-box").hidden) loadAnalysis("stack", { name: "stack" }, gen);
}

async function runSql() {
  const err = $("sql-error");
  err.hidden = true;
  try {
    const t = await timed("sql-result",
      api("/api/sql", selParams(), {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ sql: $("sql").value }),
      })
    );
    renderTable("sql-result", t);
  } catch (e) {
    err.textContent = e.message;
    err.hidden = false;
    $("sql-result").replaceChildren();
  }
}

// ---- live: the datasets' manifests are rewritten every second while a
// capture runs; when their span grows, an open-ended window follows it.

async function poll() {
  if (!$("live").checked) return;
  try {
    info = await api("/api/datasets");
    const end = info.span ? info.span.last_ns : null;
    if (end !== lastSpanEnd) {
      lastSpanEnd = end;
      renderFacts();
      if (sel.to === null && pending === 0) refresh();
    }
  } catch (e) {
    $("status").textContent = e.message;
  }
}

async function start() {
  readAddress();
  try {
    info = await track(api("/api/datasets"));
  } catch (e) {
    $("status").textContent = e.message;
    return;
  }
  lastSpanEnd = info.span ? info.span.last_ns : null;
  $("names").textContent = info.datasets.map((d) => d.name).join(" + ");
  $("live").checked = anyRunning();
  renderFacts();
  $("filter-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    setSelection(sel.from, sel.to, $("filter").value.trim());
  });
  $("clear").addEventListener("click", () => setSelection(sel.from, sel.to, ""));
  $("zoom-out").addEventListener("click", zoomOut);
  $("whole").addEventListener("click", () => {
    zooms.length = 0;
    setSelection(null, null);
  });
  $("sql-run").addEventListener("click", runSql);
  for (const r of document.querySelectorAll("input[name=measure]")) {
    r.addEventListener("change", () => {
      measure = r.value;
      if (lastOverview) drawOverview(lastOverview);
    });
  }
  window.addEventListener("resize", () => lastOverview && drawOverview(lastOverview));
  setInterval(poll, 1000);
  loadIntegrity(false);
  await refresh();
  pending--;
  document.body.dataset.pending = String(pending);
  if (pending === 0) $("status").textContent = anyRunning() ? "live" : "ready";
}

document.addEventListener("DOMContentLoaded", start);
