/* Optimization dashboard: charts (hand-written SVG), message map (canvas), "what the model saw",
 * requests table and summaries — all drawn from the dashboard JSON API. No chart library. */
(function () {
  "use strict";

  const root = document.getElementById("dash");
  if (!root || !Number(root.dataset.turns)) return;

  const SVGNS = "http://www.w3.org/2000/svg";
  const api = root.dataset.api; // /api/dashboard/conversations/<pk>/
  const chatUrl = root.dataset.chatUrl;
  // Shared page helpers (static/js/common.js): CSRF-aware JSON fetch, error wording, the confirm dialog.
  const { api: request, getJSON, errorText, confirmAction } = Longchat;
  const state = { series: null, map: null, turn: null, recordsOffset: null, summariesOffset: 0 };

  // ---------- helpers ----------
  const nf = new Intl.NumberFormat();
  function fmt(n) {
    if (n === null || n === undefined) return "—";
    const a = Math.abs(n);
    const short = (v, digits) => v.toFixed(digits).replace(/\.0$/, "");
    if (a >= 1e9) return short(n / 1e9, a >= 1e11 ? 0 : 1) + "B";
    if (a >= 1e6) return short(n / 1e6, a >= 1e8 ? 0 : 1) + "M";
    if (a >= 1e4) return short(n / 1e3, a >= 1e5 ? 0 : 1) + "k";
    return nf.format(n);
  }
  function usd(x) {
    if (x === null || x === undefined) return "—";
    if (Math.abs(x) >= 1) return "$" + x.toFixed(2);
    return "$" + x.toFixed(4);
  }
  function svg(tag, attrs, parent) {
    const node = document.createElementNS(SVGNS, tag);
    for (const k in attrs || {}) node.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(node);
    return node;
  }
  function h(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const k in attrs || {}) {
      if (k === "class") node.className = attrs[k];
      else if (k === "text") node.textContent = attrs[k];
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), attrs[k]);
      else if (attrs[k] !== null && attrs[k] !== undefined && attrs[k] !== false) node.setAttribute(k, attrs[k]);
    }
    for (const c of children) if (c !== null && c !== undefined) node.append(c);
    return node;
  }
  function messageLink(id) { return chatUrl + "#m-" + id; }
  function niceStep(range, target) {
    const raw = range / Math.max(1, target);
    const pow = Math.pow(10, Math.floor(Math.log10(raw || 1)));
    const n = raw / pow;
    return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 5 ? 5 : 10) * pow;
  }
  function debounce(fn, ms) {
    let t = null;
    return function () { clearTimeout(t); t = setTimeout(fn, ms); };
  }

  // Tooltip shared by a chart container; its content is built as nodes (no HTML strings).
  function tooltip(container) {
    const tip = h("div", { class: "dash-tip", hidden: "" });
    container.appendChild(tip);
    return {
      show(parts, x, y) {
        tip.replaceChildren(...parts.filter((part) => part !== null && part !== undefined));
        tip.hidden = false;
        const cw = container.clientWidth;
        const tw = tip.offsetWidth;
        let left = x + 14;
        if (left + tw > cw) left = Math.max(0, x - tw - 14);
        tip.style.left = left + "px";
        tip.style.top = Math.max(0, y - 10) + "px";
      },
      hide() { tip.hidden = true; },
    };
  }

  // The charts draw the turns of the chosen range ("all", around the start, or the latest turns).
  function rangeBounds() {
    const n = state.series.count;
    const first = state.series.first_optimized_index;
    if (state.range === "start" && first !== null) {
      const span = Math.max(60, first * 2);
      const lo = Math.max(0, first - Math.round(span / 2));
      return [lo, Math.min(n, lo + span + 1)];
    }
    if (state.range === "latest") return [Math.max(0, n - 200), n];
    return [0, n];
  }
  function view() {
    const s = state.series;
    const [lo, hi] = rangeBounds();
    const v = { offset: lo, count: hi - lo, strategy_codes: s.strategy_codes };
    for (const k of ["ids", "tokens_full", "tokens_sent", "budget", "trigger", "provider_prompt_tokens", "strategy", "saved_cumulative"]) {
      v[k] = s[k].slice(lo, hi);
    }
    // Recall tokens (part of what was sent); absent from an older API, then none.
    v.recall_tokens = (s.recall_tokens || []).slice(lo, hi);
    if (v.recall_tokens.length !== v.count) v.recall_tokens = new Array(v.count).fill(0);
    const f = s.first_optimized_index;
    v.first_optimized_index = f !== null && f >= lo && f < hi ? f - lo : null;
    return v;
  }

  // ---------- chart 1: tokens per turn ----------
  function drawTokens() {
    const s = view();
    const off = s.offset;
    const box = document.getElementById("chart-tokens");
    box.replaceChildren();
    const n = s.count;
    const W = Math.max(280, box.clientWidth);
    const H = W < 600 ? 230 : 300;
    const m = { l: W < 600 ? 44 : 56, r: 14, t: 14, b: 26 };
    const pw = W - m.l - m.r, ph = H - m.t - m.b;
    const maxFull = Math.max(...s.tokens_full, ...s.budget, 1);
    const maxBudget = Math.max(...s.budget, 1);
    const log = maxFull / maxBudget > 4;
    let y;
    let ticks;
    if (log) {
      const minV = Math.max(1, Math.min(...s.tokens_sent.filter((v) => v > 0), maxBudget));
      const lo = Math.pow(10, Math.floor(Math.log10(minV)));
      const hi = maxFull * 1.3;
      const L0 = Math.log10(lo), L1 = Math.log10(hi);
      y = (v) => m.t + ph - ((Math.log10(Math.max(v, lo)) - L0) / (L1 - L0)) * ph;
      ticks = [];
      for (let p = lo; p <= hi * 1.0001; p *= 10) {
        ticks.push(p);
        if (L1 - L0 <= 3) { if (p * 2 < hi) ticks.push(p * 2); if (p * 5 < hi) ticks.push(p * 5); }
      }
    } else {
      const top = maxFull * 1.08;
      const step = niceStep(top, 5);
      y = (v) => m.t + ph - (v / top) * ph;
      ticks = [];
      for (let v = 0; v <= top; v += step) ticks.push(v);
    }
    const x = (i) => m.l + (n <= 1 ? pw / 2 : (i / (n - 1)) * pw);
    const el = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, "data-scale": log ? "log" : "linear" }, box);

    const grid = svg("g", { class: "grid" }, el);
    const axis = svg("g", { class: "axis" }, el);
    for (const v of ticks) {
      svg("line", { x1: m.l, x2: W - m.r, y1: y(v), y2: y(v) }, grid);
      const t = svg("text", { x: m.l - 6, y: y(v) + 4, "text-anchor": "end" }, axis);
      t.textContent = fmt(v);
    }
    xLabels(axis, n, off, x, W, H);
    const axisLabel = svg("text", { x: m.l, y: H - 8, "text-anchor": "start" }, axis);
    axisLabel.textContent = n > 1 ? "turn" : "";
    const note = document.getElementById("scale-note");
    if (note) note.textContent = log ? " Logarithmic scale: the full history grows far past the budget." : "";

    // Shaded region from the first optimized turn: the moment optimization starts.
    const first = s.first_optimized_index;
    if (first !== null && first !== undefined) {
      const xs = x(first);
      svg("rect", { class: "opt-region", x: xs, y: m.t, width: Math.max(0, W - m.r - xs), height: ph }, el);
    }

    const pts = (arr) => arr.map((v, i) => x(i).toFixed(1) + "," + y(v).toFixed(1)).join(" ");
    // Budget and trigger: step lines that only break where the value changes.
    function steps(arr) {
      const out = [];
      for (let i = 0; i < n; i++) {
        if (i === 0 || arr[i] !== arr[i - 1]) {
          if (i > 0) out.push(x(i).toFixed(1) + "," + y(arr[i - 1]).toFixed(1));
          out.push(x(i).toFixed(1) + "," + y(arr[i]).toFixed(1));
        }
      }
      out.push((W - m.r).toFixed(1) + "," + y(arr[n - 1]).toFixed(1));
      if (n === 1) out.unshift(m.l + "," + y(arr[0]).toFixed(1));
      return out.join(" ");
    }
    const sentPts = pts(s.tokens_sent);
    svg("polygon", {
      class: "area-sent",
      points: `${x(0).toFixed(1)},${m.t + ph} ${sentPts} ${x(n - 1).toFixed(1)},${m.t + ph}`,
    }, el);
    svg("polyline", { class: "line line-full", points: pts(s.tokens_full), "data-series": "tokens_full", "data-points": n }, el);
    svg("polyline", { class: "line line-trigger", points: steps(s.trigger), "data-series": "trigger" }, el);
    svg("polyline", { class: "line line-budget", points: steps(s.budget), "data-series": "budget" }, el);
    svg("polyline", { class: "line line-sent", points: sentPts, "data-series": "tokens_sent", "data-points": n }, el);
    // The recall block's share of what was sent: drawn only when some turn in the range recalled.
    const anyRecall = s.recall_tokens.some((v) => v > 0);
    const recallLegend = document.querySelector("[data-legend=recall_tokens]");
    if (recallLegend) recallLegend.hidden = !anyRecall;
    if (anyRecall) {
      svg("polyline", { class: "line line-recall", points: pts(s.recall_tokens), "data-series": "recall_tokens", "data-points": n }, el);
    }

    if (first !== null && first !== undefined) {
      const xs = x(first);
      svg("line", { class: "opt-start", x1: xs, x2: xs, y1: m.t, y2: m.t + ph, "data-turn": off + first + 1 }, el);
      const text = "Optimization starts · turn " + nf.format(off + first + 1);
      const right = xs > m.l + pw * 0.6;
      const lbl = svg("text", { class: "opt-label", x: right ? xs - 8 : xs + 8, y: m.t + 16, "text-anchor": right ? "end" : "start" });
      lbl.textContent = text;
      const bgW = text.length * 6.6 + 8;
      svg("rect", { class: "opt-label-bg", x: right ? xs - 8 - bgW + 4 : xs + 4, y: m.t + 3, width: bgW, height: 18, rx: 4 }, el);
      el.appendChild(lbl);
    }

    // Selected turn marker + hover.
    const sel = svg("line", { class: "selected-turn", y1: m.t, y2: m.t + ph, visibility: "hidden" }, el);
    const hover = svg("line", { class: "hover-line", y1: m.t, y2: m.t + ph, visibility: "hidden" }, el);
    const dotFull = svg("circle", { class: "hover-dot", r: 4, fill: "var(--c-full)", visibility: "hidden" }, el);
    const dotSent = svg("circle", { class: "hover-dot", r: 4, fill: "var(--c-sent)", visibility: "hidden" }, el);
    const overlay = svg("rect", { class: "overlay", x: m.l, y: m.t, width: pw, height: ph }, el);
    const tip = tooltip(box);
    const names = s.strategy_codes;
    const indexAt = (evt) => turnIndexAt(evt, el, { W, left: m.l, pw, n });
    function showAt(evt) {
      const i = indexAt(evt);
      const xi = x(i);
      for (const node of [hover, dotFull, dotSent]) node.setAttribute("visibility", "visible");
      hover.setAttribute("x1", xi); hover.setAttribute("x2", xi);
      dotFull.setAttribute("cx", xi); dotFull.setAttribute("cy", y(s.tokens_full[i]));
      dotSent.setAttribute("cx", xi); dotSent.setAttribute("cy", y(s.tokens_sent[i]));
      const saved = s.tokens_full[i] - s.tokens_sent[i];
      const prov = s.provider_prompt_tokens[i];
      const r = el.getBoundingClientRect();
      tip.show([
        h("b", { text: `Turn ${nf.format(off + i + 1)}` }), " ", h("span", { class: "muted", text: "· " + names[s.strategy[i]] }), h("br"),
        "Full history ", h("b", { text: nf.format(s.tokens_full[i]) }), h("br"),
        "Sent ", h("b", { text: nf.format(s.tokens_sent[i]) }), saved > 0 ? h("span", { class: "muted", text: ` (−${fmt(saved)})` }) : null, h("br"),
        s.recall_tokens[i] > 0 ? h("span", null, "of which recalled ", h("b", { text: nf.format(s.recall_tokens[i]) }), h("br")) : null,
        `Budget ${nf.format(s.budget[i])} · trigger ${nf.format(s.trigger[i])}`,
        prov !== null ? h("br") : null, prov !== null ? h("span", { class: "muted", text: `Provider counted ${nf.format(prov)}` }) : null,
      ], (xi / W) * r.width, evt.clientY - r.top);
    }
    overlay.addEventListener("pointermove", showAt);
    overlay.addEventListener("pointerleave", () => {
      for (const node of [hover, dotFull, dotSent]) node.setAttribute("visibility", "hidden");
      tip.hide();
    });
    overlay.addEventListener("click", (evt) => selectTurn(off + indexAt(evt) + 1));
    state.markTokens = (turn) => {
      const i = turn - 1 - off;
      if (i < 0 || i >= n) { sel.setAttribute("visibility", "hidden"); return; }
      sel.setAttribute("x1", x(i)); sel.setAttribute("x2", x(i)); sel.setAttribute("visibility", "visible");
    };
    if (state.turn) state.markTokens(state.turn);
  }

  // ---------- chart 2: strategy per turn + cumulative savings ----------
  function drawStrategy() {
    const s = view();
    const off = s.offset;
    const box = document.getElementById("chart-strategy");
    box.replaceChildren();
    const n = s.count;
    const W = Math.max(280, box.clientWidth);
    const H = W < 600 ? 190 : 220;
    const m = { l: W < 600 ? 44 : 56, r: 14, t: 6, b: 26 };
    const bandH = 26, gap = 12;
    const pw = W - m.l - m.r;
    const areaTop = m.t + bandH + gap, ah = H - areaTop - m.b;
    const x = (i) => m.l + (n <= 1 ? 0 : (i / (n - 1)) * pw);
    const cell = n <= 1 ? pw : pw / (n - 1);
    const el = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H }, box);
    const names = s.strategy_codes;

    // Background runs (everything sent / window kept), then one mark per decision turn.
    const band = svg("g", { class: "band" }, el);
    let runStart = 0;
    for (let i = 1; i <= n; i++) {
      const codeAt = (k) => (s.strategy[k] >= 2 ? 1 : s.strategy[k]); // decisions sit on a "window" background
      if (i === n || codeAt(i) !== codeAt(runStart)) {
        const x0 = runStart === 0 ? m.l : x(runStart) - cell / 2;
        const x1 = i === n ? W - m.r : x(i) - cell / 2;
        svg("rect", { class: "s-" + names[codeAt(runStart)], x: x0, y: m.t, width: Math.max(0.5, x1 - x0), height: bandH, "data-run": names[codeAt(runStart)], "data-length": i - runStart }, band);
        runStart = i;
      }
    }
    // Decisions in two lanes (summaries above, truncations below) so dense runs stay readable.
    let marks = 0;
    const lane = bandH / 2;
    const w = Math.max(n > 400 ? 1 : 2, cell);
    for (let i = 0; i < n; i++) {
      const code = s.strategy[i];
      if (code < 2) continue;
      const top = names[code] === "summarize" ? m.t : m.t + lane;
      svg("rect", { class: "s-" + names[code], x: x(i) - w / 2, y: top, width: w, height: lane, "data-strategy": names[code], "data-turn": off + i + 1 }, band);
      marks++;
    }
    band.setAttribute("data-marks", marks);

    // Cumulative savings area.
    const totalSaved = s.saved_cumulative[n - 1] || 0;
    if (totalSaved <= 0) {
      const note = svg("text", { class: "band-label", x: m.l + pw / 2, y: areaTop + ah / 2, "text-anchor": "middle" }, el);
      note.textContent = "Nothing saved in these turns: everything fit under the trigger.";
      xLabels(svg("g", { class: "axis" }, el), n, off, x, W, H);
      return;
    }
    const maxSaved = Math.max(1, ...s.saved_cumulative);
    const step = niceStep(maxSaved, 3);
    const top = Math.ceil(maxSaved / step) * step || 1;
    const y = (v) => areaTop + ah - (v / top) * ah;
    const grid = svg("g", { class: "grid" }, el);
    const axis = svg("g", { class: "axis" }, el);
    for (let v = 0; v <= top + 1e-9; v += step) {
      svg("line", { x1: m.l, x2: W - m.r, y1: y(v), y2: y(v) }, grid);
      const t = svg("text", { x: m.l - 6, y: y(v) + 4, "text-anchor": "end" }, axis);
      t.textContent = fmt(v);
    }
    xLabels(axis, n, off, x, W, H);
    const pts = s.saved_cumulative.map((v, i) => x(i).toFixed(1) + "," + y(v).toFixed(1)).join(" ");
    svg("polygon", { class: "area-saved", points: `${x(0).toFixed(1)},${y(0)} ${pts} ${x(n - 1).toFixed(1)},${y(0)}` }, el);
    svg("polyline", { class: "line line-saved", points: pts, "data-series": "saved_cumulative", "data-points": n }, el);
    const total = s.saved_cumulative[n - 1] || 0;
    const endLabel = svg("text", { class: "opt-label", x: m.l + 8, y: areaTop + 14, "text-anchor": "start" }, el);
    endLabel.textContent = fmt(total) + " tokens not sent";

    const hover = svg("line", { class: "hover-line", y1: m.t, y2: areaTop + ah, visibility: "hidden" }, el);
    const overlay = svg("rect", { class: "overlay", x: m.l, y: m.t, width: pw, height: H - m.t - m.b }, el);
    const tip = tooltip(box);
    const indexAt = (evt) => turnIndexAt(evt, el, { W, left: m.l, pw, n });
    overlay.addEventListener("pointermove", (evt) => {
      const i = indexAt(evt);
      hover.setAttribute("x1", x(i)); hover.setAttribute("x2", x(i)); hover.setAttribute("visibility", "visible");
      const r = el.getBoundingClientRect();
      tip.show([
        h("b", { text: `Turn ${nf.format(off + i + 1)}` }), " · " + names[s.strategy[i]], h("br"),
        "Not sent so far ", h("b", { text: fmt(s.saved_cumulative[i]) }), " tokens",
      ], (x(i) / W) * r.width, evt.clientY - r.top);
    });
    overlay.addEventListener("pointerleave", () => { hover.setAttribute("visibility", "hidden"); tip.hide(); });
    overlay.addEventListener("click", (evt) => selectTurn(off + indexAt(evt) + 1));
  }
  // The turn (index in the drawn range) under the pointer, from a chart's geometry.
  function turnIndexAt(evt, el, { W, left, pw, n }) {
    const r = el.getBoundingClientRect();
    const px = ((evt.clientX - r.left) / r.width) * W;
    return Math.max(0, Math.min(n - 1, Math.round(((px - left) / pw) * (n - 1))));
  }
  function xLabels(axis, n, off, x, W, H) {
    const xstep = Math.max(1, niceStep(n, W < 600 ? 4 : 8));
    const startAt = Math.ceil((off + 1) / xstep) * xstep;
    for (let t = startAt; t <= off + n; t += xstep) {
      const label = svg("text", { x: x(t - 1 - off), y: H - 8, "text-anchor": "middle" }, axis);
      label.textContent = nf.format(t);
    }
  }
  function setupRange() {
    const buttons = document.querySelectorAll("[data-range]");
    if (state.series.first_optimized_index === null) document.querySelector("[data-range=start]").hidden = true;
    if (state.series.count <= 200) document.querySelector("[data-range=latest]").hidden = true;
    const group = document.querySelector(".dash-seg");
    if (group && [...buttons].filter((b) => !b.hidden).length < 2) group.hidden = true;
    for (const b of buttons) {
      b.addEventListener("click", () => {
        state.range = b.dataset.range;
        for (const o of buttons) o.setAttribute("aria-pressed", String(o === b));
        drawTokens(); drawStrategy();
      });
    }
  }

  // ---------- message map ----------
  function decodeMap(mp) {
    const ids = new Array(mp.count);
    const statuses = new Uint8Array(mp.count);
    let k = 0;
    for (const [start, len] of mp.id_runs) for (let j = 0; j < len; j++) ids[k++] = start + j;
    k = 0;
    for (const [code, len] of mp.status_runs) for (let j = 0; j < len; j++) statuses[k++] = code;
    // Users' numbering: chat messages 1, 2, 3 ... in order; summaries ("S") are not numbered.
    const numbers = new Uint32Array(mp.count);
    let n = 0;
    for (let i = 0; i < mp.count; i++) numbers[i] = mp.roles[i] === "S" ? 0 : ++n;
    return { ids, statuses, roles: mp.roles, numbers, chatCount: n };
  }
  function drawMap() {
    const mp = state.map;
    const wrap = document.getElementById("map-wrap");
    const canvas = document.getElementById("message-map");
    const n = mp.count;
    const W = Math.max(240, wrap.clientWidth);
    // Cells shrink with the conversation so thousands of messages stay on one screen.
    const maxH = W < 600 ? 360 : 320;
    let size = Math.floor(Math.sqrt((W * maxH) / Math.max(1, n)));
    size = Math.max(3, Math.min(16, size));
    const gap = size >= 6 ? 1 : 0;
    const perRow = Math.max(1, Math.floor((W + gap) / (size + gap)));
    const rows = Math.ceil(n / perRow);
    const Hc = Math.max(size, rows * (size + gap) - gap);
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.round(W * dpr);
    canvas.height = Math.round(Hc * dpr);
    canvas.style.height = Hc + "px";
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, Hc);
    const styles = getComputedStyle(root);
    const colors = mp.statuses.map((st) => styles.getPropertyValue("--st-" + st).trim() || "#999");
    const dec = state.mapDecoded;
    for (let i = 0; i < n; i++) {
      ctx.fillStyle = colors[dec.statuses[i]];
      ctx.fillRect((i % perRow) * (size + gap), Math.floor(i / perRow) * (size + gap), size, size);
    }
    canvas.dataset.cells = n;
    canvas.dataset.runs = mp.status_runs.length;
    canvas.dataset.cellSize = size;
    canvas.dataset.perRow = perRow;
    canvas.dataset.gap = gap;
    state.mapGeom = { size, gap, perRow, n };
  }
  function mapIndexAt(evt) {
    const g = state.mapGeom;
    const canvas = document.getElementById("message-map");
    const r = canvas.getBoundingClientRect();
    const cx = evt.clientX - r.left, cy = evt.clientY - r.top;
    const col = Math.floor(cx / (g.size + g.gap)), row = Math.floor(cy / (g.size + g.gap));
    if (col < 0 || col >= g.perRow || row < 0) return -1;
    const i = row * g.perRow + col;
    return i < g.n ? i : -1;
  }
  function setupMap() {
    const mp = state.map;
    state.mapDecoded = decodeMap(mp);
    for (const li of document.querySelectorAll("#map-legend li")) {
      const c = mp.status_counts[li.dataset.status] || 0;
      li.querySelector("[data-count]").textContent = nf.format(c);
      li.hidden = c === 0;
    }
    const wrap = document.getElementById("map-wrap");
    const canvas = document.getElementById("message-map");
    const tip = tooltip(wrap);
    const roleName = { u: "user", a: "assistant", s: "system", S: "summary" };
    canvas.addEventListener("pointermove", (evt) => {
      const i = mapIndexAt(evt);
      if (i < 0) { tip.hide(); return; }
      const d = state.mapDecoded;
      const r = canvas.getBoundingClientRect();
      tip.show([
        h("b", { text: d.numbers[i] ? "#" + nf.format(d.numbers[i]) : "Summary" }), " · " + (roleName[d.roles[i]] || "?"), h("br"),
        mp.status_labels[d.statuses[i]], h("br"),
        h("span", { class: "muted", text: (d.numbers[i] ? `message ${nf.format(d.numbers[i])} of ${nf.format(d.chatCount)} · ` : "") + "click to open" }),
      ], evt.clientX - r.left, evt.clientY - r.top);
    });
    canvas.addEventListener("pointerleave", () => tip.hide());
    canvas.addEventListener("click", (evt) => {
      const i = mapIndexAt(evt);
      if (i >= 0) window.location.href = messageLink(state.mapDecoded.ids[i]);
    });
    // Accessible list of runs.
    const ol = document.querySelector("#map-runs ol");
    const items = [];
    let k = 0;
    const dec = state.mapDecoded;
    for (const [code, len] of mp.status_runs) {
      // the run's numbered messages (a run of summaries has none)
      const numbered = [];
      for (let j = k; j < k + len; j++) if (dec.numbers[j]) numbered.push(dec.numbers[j]);
      const first = numbered[0], last = numbered[numbered.length - 1];
      const label = !numbered.length ? (len === 1 ? "Summary" : `${nf.format(len)} summaries`)
        : first === last ? `#${nf.format(first)}` : `#${nf.format(first)} – #${nf.format(last)}`;
      items.push(h("li", null,
        h("span", { class: "dash-sw", style: `background: var(--st-${mp.statuses[code]})` }),
        h("a", { href: messageLink(dec.ids[k]), text: label }),
        h("span", { text: `${mp.status_labels[code]} · ${nf.format(len)} message${len === 1 ? "" : "s"}` })));
      k += len;
    }
    ol.replaceChildren(...items);
    drawMap();
  }

  // ---------- what the model saw ----------
  async function selectTurn(turn) {
    const s = state.series;
    turn = Math.max(1, Math.min(s.count, Math.round(turn) || s.count));
    state.turn = turn;
    document.getElementById("turn-input").value = turn;
    if (state.markTokens) state.markTokens(turn);
    for (const tr of document.querySelectorAll("#records-table tbody tr")) tr.classList.toggle("is-selected", Number(tr.dataset.turn) === turn);
    const view = document.getElementById("turn-view");
    const id = s.ids[turn - 1];
    view.setAttribute("aria-busy", "true");
    let data;
    try {
      data = await getJSON(`${api}records/${id}/`);
    } catch (e) {
      view.replaceChildren(h("p", { class: "dash-error", text: "Could not load this turn (" + e.message + ")." }));
      return;
    }
    if (state.turn !== turn) return;
    view.removeAttribute("aria-busy");
    const r = data.record;
    const meta = h("div", { class: "dash-turnmeta" },
      h("span", null, strategyBadge(r.strategy, r.tokens_sent < r.tokens_full), r.triggered ? " triggered" : ""),
      h("span", null, "Sent ", h("b", { text: nf.format(r.tokens_sent) }), " / budget " + nf.format(r.budget)),
      h("span", null, "Full history ", h("b", { text: nf.format(r.tokens_full) })),
      h("span", null, "Messages ", h("b", { text: `${nf.format(r.messages_after)} of ${nf.format(r.messages_before)}` })),
      r.recall_message_count ? h("span", { "data-recall": r.recall_message_count }, "Recalled ",
        h("b", { text: `${nf.format(r.recall_message_count)} earlier message${r.recall_message_count === 1 ? "" : "s"}` }),
        ` (${nf.format(r.recall_tokens)} tokens)`) : null,
      r.provider_prompt_tokens !== null ? h("span", null, "Provider counted ", h("b", { text: nf.format(r.provider_prompt_tokens) })) : null,
      h("span", null, "Packed in ", h("b", { text: r.pack_ms.toFixed(1) + " ms" })),
      r.cost_sent_usd !== null ? h("span", null, "Cost ", h("b", { text: usd(r.cost_sent_usd) }), r.cost_full_usd !== null ? ` (full ${usd(r.cost_full_usd)})` : "") : null,
      h("span", null, r.model + (r.estimated ? " · estimated count" : "")));
    const parts = [meta];
    if (r.reason) parts.push(h("p", { class: "dash-reason", text: r.reason }));
    // Users' numbering (positions among the chat messages), never database ids.
    const num = (id) => "#" + nf.format(data.numbers[String(id)] ?? id);
    const summaryName = (id) => data.summary_numbers[String(id)] ? `summary ${data.summary_numbers[String(id)]}` : "a new summary";
    const list = h("ol", { class: "dash-sent", id: "sent-list", "data-count": data.entries.length, "data-record": r.id });
    for (const e of data.entries) {
      const body = h("div", { class: "dash-sent-body", text: e.content || (e.missing ? "(message no longer stored)" : "") });
      const more = h("button", { type: "button", class: "dash-more", text: "Show all", hidden: (e.content || "").length < 400 ? "" : null,
        onclick: () => { body.classList.toggle("is-open"); more.textContent = body.classList.contains("is-open") ? "Show less" : "Show all"; } });
      const ids = e.source_ids;
      const recall = e.recall;
      const head = h("div", { class: "dash-sent-head" },
        h("span", { class: "pos", text: "#" + e.position }),
        h("span", { class: "dash-badge o-" + e.origin, text: recall ? "recalled" : e.origin }),
        h("span", { text: e.role }),
        // A recall block's quotes are listed one by one below.
        ids.length && !recall ? h("a", { href: messageLink(ids[0]), text: e.origin === "summary" ? summaryName(ids[0]) : ids.length === 1 ? `message ${num(ids[0])}` : `messages ${num(ids[0])}–${num(ids[ids.length - 1])}` }) : null,
        recall ? h("span", { text: `${ids.length} quoted message${ids.length === 1 ? "" : "s"}` }) : null,
        h("span", { class: "tok", text: nf.format(e.tokens || 0) + " tok" }));
      const li = h("li", { class: "o-" + e.origin, "data-origin": e.origin, "data-tokens": e.tokens }, head);
      const note = (text) => li.append(h("p", { class: "dash-sent-note", text }));
      if (e.compressed) {
        note(`Compressed: sent as head + tail, ${nf.format(e.tokens)} of its ${nf.format(e.original_tokens)} tokens.` +
          (e.content_is_sent_text ? " The text sent is shown." : " The original is shown."));
      }
      if (e.covers) note(`Summary of messages ${num(e.covers[0])}–${num(e.covers[1])}` + (e.covers[2] ? ` (${nf.format(e.covers[2])} messages)` : "") + (e.edited ? ", as edited by you" : ""));
      if (e.replaced_by_id) note(`Edited after this request (now ${summaryName(e.replaced_by_id)}); the text below is the one sent.`);
      if (e.edited_after) note("Edited after this request: the text below is the current version, not the one sent.");
      if (recall) {
        li.append(recallWhy(recall, num));
        if (!e.content_is_sent_text) note("A quoted message is no longer stored: the text below is incomplete.");
      }
      li.append(body, more);
      list.append(li);
    }
    parts.push(list);
    const dropped = (data.dropped_ranges || []).map(([a, b]) => (a === b ? num(a) : `${num(a)}–${num(b)}`));
    const recalled = data.recalled_ids || [];
    parts.push(h("p", { class: "dash-sent-foot", text:
      (data.request_shape && data.request_shape.length
        ? `${data.entries.length} messages, ${nf.format(data.entry_tokens)} tokens, sent as one template-safe request ` +
          `(${data.request_shape.join("; ")}) of ${nf.format(r.tokens_sent)} tokens with reply priming.`
        : `${data.entries.length} messages, ${nf.format(data.entry_tokens)} tokens + reply priming = ${nf.format(r.tokens_sent)} sent.`) +
      (data.summary ? ` Summarized: ${num(data.summary.covers_from_id)}–${num(data.summary.covers_through_id)}.` : "") +
      (recalled.length ? ` Recalled (quoted, not dropped): ${recalled.slice(0, 8).map(num).join(", ")}${recalled.length > 8 ? ` and ${recalled.length - 8} more` : ""}.` : "") +
      (dropped.length ? ` Dropped: ${dropped.slice(0, 8).join(", ")}${dropped.length > 8 ? ` and ${dropped.length - 8} more ranges` : ""}.` : "") }));
    view.replaceChildren(...parts);
  }
  // Why a recall block was sent: the query terms, then each quoted message linked to its place in
  // the chat, the search's hits in bold (ranked) and the neighbours they brought along plain.
  function recallWhy(recall, num) {
    const terms = h("p", { class: "dash-recall-why", "data-recall-terms": recall.terms.length },
      h("span", { text: "Query terms:" }),
      ...(recall.terms.length ? recall.terms.map((t) => h("span", { class: "term", text: t })) : [h("span", { text: "—" })]));
    const quotes = h("p", { class: "dash-recall-why", "data-recall-quotes": recall.quotes.length },
      h("span", { text: "Quoted:" }),
      ...recall.quotes.map((q) => h("a", {
        href: messageLink(q.id),
        class: q.hit ? "is-hit" : null,
        "data-quote": q.id,
        title: (q.hit ? `Hit #${q.rank} of the search` : "Neighbour of a hit") + (q.role ? ` · ${q.role}` : "") +
          (q.created_at ? ` · ${new Date(q.created_at).toLocaleString()}` : ""),
        text: `${num(q.id)}${q.hit ? " (hit)" : ""}`,
      })));
    return h("div", null, terms, quotes);
  }
  function setupTurnPicker() {
    const input = document.getElementById("turn-input");
    input.addEventListener("change", () => selectTurn(Number(input.value)));
    document.querySelector("[data-turn=prev]").addEventListener("click", () => selectTurn((state.turn || 1) - 1));
    document.querySelector("[data-turn=next]").addEventListener("click", () => selectTurn((state.turn || 0) + 1));
    document.querySelector("[data-turn=latest]").addEventListener("click", () => selectTurn(state.series.count));
  }

  function percent(part, whole) {
    if (!whole) return "—";
    const p = (100 * part) / whole;
    // 99.6% is not 100%: keep a decimal near the ends.
    return (p > 99 && p < 100) || (p > 0 && p < 1) ? p.toFixed(1) + "%" : Math.round(p) + "%";
  }

  // "none" after the trigger fired once still sends only the window: say so.
  function strategyBadge(strategy, saved) {
    const label = strategy === "none" && saved ? "window" : strategy;
    return h("span", { class: "dash-badge st-" + label, text: label });
  }

  // ---------- requests table (paginated API, newest first) ----------
  const PAGE = 15;
  async function loadRecords(offset) {
    const total = state.series.count;
    offset = Math.max(0, Math.min(offset, Math.max(0, total - 1)));
    state.recordsOffset = offset;
    const data = await getJSON(`${api}records/?limit=${PAGE}&offset=${offset}`);
    const body = document.querySelector("#records-table tbody");
    const rows = data.results.slice().reverse().map((r) => {
      const tr = h("tr", { "data-turn": r.turn, "data-record": r.id, tabindex: "0" },
        h("td", { text: nf.format(r.turn) }),
        h("td", { class: "l" }, strategyBadge(r.strategy, r.tokens_saved > 0)),
        h("td", { text: fmt(r.tokens_full) }),
        h("td", { text: fmt(r.tokens_sent) }),
        h("td", { text: percent(r.tokens_saved, r.tokens_full) }),
        h("td", { class: "hide-sm", text: r.provider_prompt_tokens === null ? "—" : fmt(r.provider_prompt_tokens) }),
        h("td", { class: "hide-sm", text: r.pack_ms.toFixed(1) + " ms" }));
      tr.classList.toggle("is-selected", r.turn === state.turn);
      tr.addEventListener("click", () => selectTurn(r.turn));
      tr.addEventListener("keydown", (e) => { if (e.key === "Enter") selectTurn(r.turn); });
      return tr;
    });
    body.replaceChildren(...rows);
    const first = offset + 1, last = offset + data.results.length;
    document.querySelector("[data-page-label]").textContent = `${nf.format(first)}–${nf.format(last)} of ${nf.format(data.count)}`;
    document.querySelector("[data-page=newer]").disabled = last >= data.count;
    document.querySelector("[data-page=older]").disabled = offset <= 0;
  }
  function setupRecords() {
    document.querySelector("[data-page=newer]").addEventListener("click", () => loadRecords(state.recordsOffset + PAGE));
    document.querySelector("[data-page=older]").addEventListener("click", () => loadRecords(Math.max(0, state.recordsOffset - PAGE)));
    return loadRecords(Math.max(0, state.series.count - PAGE));
  }

  // ---------- summaries ----------
  function summaryItem(sm, inUse) {
    const text = h("div", { class: "dash-summary-text", text: sm.content });
    const status = h("span", { class: "dash-error", role: "status" });
    const li = h("li", { class: "dash-summary" + (sm.discarded ? " is-discarded" : ""), "data-summary": sm.id });
    const duration = sm.duration_s !== null ? sm.duration_s.toFixed(1) + " s" : "—";
    const meta = h("div", { class: "dash-summary-meta" },
      h("span", null, h("b", { text: "Summary " + (sm.number ?? "") }), sm.edited_from_number ? ` · edit of summary ${sm.edited_from_number}` : "",
        h("span", { "data-state": "", text: sm.discarded ? " · discarded" : inUse ? " · in use" : " · replaced by a later summary" })),
      h("span", null, "Covers messages ", h("a", { href: messageLink(sm.covers_from_id), text: `${sm.covers_from_number}–${sm.covers_through_number}` }),
        sm.covered_message_count ? ` (${nf.format(sm.covered_message_count)} messages)` : ""),
      sm.source_chars ? h("span", { text: `${fmt(sm.source_chars)} → ${fmt(sm.summary_chars)} characters` }) : null,
      h("span", { text: sm.extractive ? "Extractive (no model)" : "Model: " + (sm.model || "—") }),
      h("span", { text: "Job " + duration + " · " + (sm.cost_usd === null ? "no cost" : usd(sm.cost_usd)) }),
      h("span", { text: `Used by ${nf.format(sm.used_by_requests)} request${sm.used_by_requests === 1 ? "" : "s"}` }));
    const more = h("button", { type: "button", class: "dash-more", text: "Show all",
      onclick: () => { text.classList.toggle("is-open"); more.textContent = text.classList.contains("is-open") ? "Show less" : "Show all"; } });
    const actions = h("div", { class: "dash-summary-actions" }, more);
    if (!sm.discarded) {
      const discard = h("button", { type: "button", class: "btn btn--sm btn--ghost btn--danger-text", text: "Discard" });
      discard.addEventListener("click", async () => {
        const ok = await confirmAction("Discard this summary (and the versions it was edited from or into)? No message is deleted: the next request refits the history to the budget, with the previous summary where one is left.", "Discard");
        if (!ok || !(await summaryCall(sm.id, "DELETE", undefined, status))) return;
        // Other summaries are untouched, and an earlier one may now be in use: list them afresh.
        await reloadSummaries();
      });
      // Only the summary in use (the newest live one) reaches the model, so only it can be edited.
      if (inUse) actions.append(summaryEditButton(sm, li, status));
      actions.append(discard);
    }
    actions.append(status);
    li.append(meta, text, actions);
    return li;
  }
  function summaryEditButton(sm, li, status) {
    const edit = h("button", { type: "button", class: "btn btn--sm btn--ghost", text: "Edit" });
    edit.addEventListener("click", () => {
      const area = h("textarea", { "aria-label": "Summary text" });
      area.value = sm.content;
      const save = h("button", { type: "button", class: "btn btn--sm btn--primary", text: "Save" });
      const cancel = h("button", { type: "button", class: "btn btn--sm", text: "Cancel" });
      const editor = h("div", null, area, h("div", { class: "dash-summary-actions" }, save, cancel));
      li.append(editor);
      edit.disabled = true;
      cancel.addEventListener("click", () => { editor.remove(); edit.disabled = false; });
      save.addEventListener("click", async () => {
        const saved = await summaryCall(sm.id, "PATCH", { content: area.value }, status);
        if (!saved) return;
        // The edit is a new summary version and this one is now discarded: list them afresh.
        await reloadSummaries();
        const item = document.querySelector(`#summaries [data-summary="${saved.id}"] [role=status]`);
        if (item) item.textContent = "Saved.";
      });
    });
    return edit;
  }
  async function summaryCall(id, method, body, status) {
    status.textContent = "";
    const r = await request(`/api/summaries/${id}/`, { method, body });
    if (r.ok) return r.data || {};
    status.textContent = `Could not ${method === "DELETE" ? "discard" : "save"}: ${errorText(r.data, r.status)}`;
    return null;
  }
  async function loadSummaries() {
    const ul = document.getElementById("summaries");
    const btn = document.getElementById("summaries-more");
    const data = await getJSON(`${api}summaries/?limit=5&offset=${state.summariesOffset}`);
    if (state.summariesOffset === 0 && !data.results.length) ul.replaceChildren(h("li", { class: "dash-empty", text: "No summaries yet." }));
    for (const sm of data.results) {
      // Newest first: the first live summary listed is the one in use.
      const inUse = !sm.discarded && !state.summaryInUseShown;
      if (inUse) state.summaryInUseShown = true;
      ul.append(summaryItem(sm, inUse));
    }
    state.summariesOffset += data.results.length;
    ul.dataset.count = data.count;
    btn.hidden = !data.next;
  }
  function reloadSummaries() {
    document.getElementById("summaries").replaceChildren();
    state.summariesOffset = 0;
    state.summaryInUseShown = false;
    return loadSummaries();
  }

  // The money card gains the prompt-cache estimate computed with the series.
  function showCacheEstimate(est) {
    const card = document.querySelector("[data-card=money]");
    if (!card || !est || est.sent_usd_with_cache === null || !est.cached_tokens) return;
    const reported = est.provider_reported_turns || 0;
    const source = !reported ? "est." : reported >= state.series.count ? "reported by the endpoint" : "partly estimated";
    card.append(h("p", { class: "dash-card-detail", "data-cache-estimate": est.cached_tokens,
      title: "Turns whose endpoint reported its cached prompt tokens use that figure; for the others, between triggers each request starts with the previous one, which the provider's prompt cache bills at the cached-input price.",
      text: `Sent ${usd(est.sent_usd)}, ≈ ${usd(est.sent_usd_with_cache)} with prompt caching (${Math.round(est.cached_share * 100)}% cached, ${source})` }));
  }

  // The usage card also shows what the next request will send (the chat's context gauge), when available.
  async function showNextRequest() {
    const card = document.querySelector("[data-card=usage]");
    if (!card) return;
    let gauge;
    try {
      gauge = await getJSON(`/api/conversations/${root.dataset.conversation}/context/`);
    } catch (e) {
      return; // the numbers of the latest request stay
    }
    if (typeof gauge.tokens !== "number" || !gauge.budget) return;
    card.append(h("p", { class: "dash-card-detail", "data-next-tokens": gauge.tokens,
      text: `Next request: ${nf.format(gauge.tokens)} tokens (${Math.round(100 * gauge.tokens / gauge.budget)}% of ${nf.format(gauge.budget)})` }));
  }

  // ---------- boot ----------
  async function boot() {
    const [series, map] = await Promise.all([getJSON(`${api}series/`), getJSON(`${api}map/`)]);
    state.series = series;
    state.map = map;
    showCacheEstimate(series.prompt_cache_estimate);
    state.range = "all";
    setupRange();
    drawTokens();
    drawStrategy();
    setupMap();
    setupTurnPicker();
    document.getElementById("summaries-more").addEventListener("click", loadSummaries);
    await Promise.all([setupRecords(), loadSummaries(), selectTurn(series.count), showNextRequest()]);
    root.dataset.ready = "1";
    let lastW = window.innerWidth;
    window.addEventListener("resize", debounce(() => {
      if (window.innerWidth === lastW) return;
      lastW = window.innerWidth;
      drawTokens(); drawStrategy(); drawMap();
    }, 150));
    if (window.matchMedia) {
      window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => drawMap());
    }
  }
  boot().catch((e) => {
    root.dataset.ready = "error";
    const main = document.getElementById("main");
    main.prepend(h("p", { class: "dash-error", role: "alert", text: "The dashboard data could not be loaded: " + e.message }));
  });
})();
