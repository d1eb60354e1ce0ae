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

// ---- formatting ----

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
  if (n >= 60 * NS_PER_S) return (n / 60 / NS_PER_S).toFixed(1) + " min";
  if (n >= NS_PER_S) return (n / NS_PER_S).toFixed(3) + " s";
  if (n >= 1e6) return (n / 1e6).toFixed(3) + " ms";
  if (n >= 1e3) return (n / 1e3).toFixed(1) + " us";
  return n + " ns";
}

function si(v) {
  const n = Number(v);
  const units = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [d, u] of units) if (Math.abs(n) >= d) return (n / d).toFixed(2) + " " + u;
  return Number.isInteger(n) ? String(n) : n.toFixed(2);
}

function tcpFlags(f) {
  const bits = [[0x02, "S"], [0x01, "F"], [0x04, "R"], [0x08, "P"], [0x10, "."], [0x20, "U"], [0x40, "E"], [0x80, "W"]];
  return bits.filter(([b]) => f & b).map(([, c]) => c).join("");
}

const DURATION_COLS = /(^duration_ns$|rtt_ns$|delay_ns$|latency_ns$|after_ns$|^span_ns$|^scale_ns$)/;

function cell(col, v) {
  if (v === undefined || v === null) return "";
  if (typeof v === "number" || /^-?\d+$/.test(String(v))) {
    if (DURATION_COLS.test(col)) return fmtDuration(v);
    if (col.endsWith("_ns")) return fmtTime(v);
    if (col.endsWith("tcp_flags")) return tcpFlags(Number(v));
    if (col.endsWith("_bps") || col.endsWith("_fps")) return si(v);
  }
  if (typeof v === "number" && !Number.isInteger(v)) return v.toPrecision(6);
  return String(v);
}

// ---- tables ----

// A table of {columns, rows}; `opts.sortable` makes headers sort, and
// `opts.onRow` makes rows clickable.
function renderTable(target, t, opts) {
  opts = opts || {};
  const box = $(target);
  box.replaceChildren();
  if (!t.rows.length) {
    box.append(el("p", { class: "hint" }, "no rows"));
    return;
  }
  const head = el("tr");
  for (const c of t.columns) {
    const th = el("th", { "data-col": c }, c);
    const numeric = t.rows.some((r) => typeof r[c] === "number");
    if (!numeric) th.classList.add("text");
    if (opts.sortable) {
      th.classList.add("sortable");
      if (opts.sort && opts.sort.col === c) th.classList.add("sorted-" + opts.sort.order);
      th.addEventListener("click", () => opts.sortable(c));
    }
    head.append(th);
  }
  const body = el("tbody");
  for (const r of t.rows) {
    const tr = el("tr");
    for (const c of t.columns) {
      const td = el("td", {}, cell(c, r[c]));
      if (typeof r[c] !== "number") td.classList.add("text");
      tr.append(td);
    }
    if (opts.onRow) tr.addEventListener("click", () => opts.onRow(r, tr));
    body.append(tr);
  }
  box.append(el("table", {}, el("thead", {}, head), body));
  if (t.truncated) box.append(el("p", { class: "truncated" }, "more rows than shown (the server's row limit)"));
}

function renderTables(target, answer) {
  const box = $(target);
  box.replaceChildren();
  for (const t of answer.tables) {
    const id = target + "-" + t.name;
    if (answer.tables.length > 1) box.append(el("h3", { class: "hint" }, t.name));
    box.append(el("div", { id: id }));
    renderTable(id, t);
  }
  if (answer.how) box.append(el("p", { class: "hint" }, answer.how));
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
  box.append(prev, el("span", { class: "hint" }, `page ${page + 1} of ${pages} (${total} rows)`), next);
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
  label(si(max), 2, top + 8);
  label("0", 2, H - bottom);
  label(fmtShortTime(from), left, H - 2);
  label(fmtShortTime(to), W - 4, H - 2, "end");
  const seen = ov.traffic[measure].reduce((a, b) => a + b, 0);
  $("overview-legend").textContent =
    `${si(seen)} ${measure} in ${fmtDuration(to - from)}, bars of ${fmtDuration(bucket)}; ` +
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
    add("frames", `${si(d.frames)} frames, ${si(d.wire_bytes)}B on the wire`);
    if (d.drops) add("drops", `kernel ${d.drops.kernel}, pcap ${d.drops.pcap} of ${d.drops.kernel_seen} the kernel saw`);
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
  return track(
    api("/api/verify", fresh ? new URLSearchParams({ fresh: "1" }) : null).then(
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
    )
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
  return track(
    api("/api/flows", p).then(
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
    )
  );
}

function loadPackets(gen) {
  return track(
    api("/api/packets", selParams({ page: packetPage, per: 50 })).then(
      (t) => {
        if (gen !== generation) return;
        renderTable("packets", t);
        pager("packets-pager", t.page, t.per, t.total, (pg) => {
          packetPage = pg;
          loadPackets(generation);
        });
      },
      (e) => showError("packets", e)
    )
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
  return track(
    api("/api/analysis", selParams(params)).then(
      (a) => {
        if (gen === generation) renderTables(target, a);
      },
      (e) => showError(target, e)
    )
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
  track(
    api("/api/overview", selParams()).then(
      (ov) => {
        if (gen === generation) drawOverview(ov);
      },
      (e) => showError("overview", e)
    )
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
    const t = await track(
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
