/* Chart 1: tokens per turn (sent, full history, provider figures, cache), hand-written SVG. A point
 * is one turn or, in a long conversation, a bucket of turns drawn at its last turn: its lines show
 * the bucket's largest request, and the sent area reaches down to its smallest. */
import { state } from "./state.js";
import { selectTurn } from "./turn.js";
import {
  chartFrame, fmt, h, nf, niceStep, pointLabel, pointOf, svg, tooltip, turnAxis, turnIndexAt, xLabels,
} from "./util.js";

export function drawTokens() {
  const { s, box, n, W, H, m } = chartFrame("chart-tokens", { heights: [230, 300], top: 14 });
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
  const { x, xt } = turnAxis(s, m.l, pw);
  const el = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, "data-scale": log ? "log" : "linear" }, box);

  const grid = svg("g", { class: "grid" }, el);
  const axis = svg("g", { class: "axis" }, el);
  for (const v of ticks) {
    svg("line", { x1: m.l, x2: W - m.r, y1: y(v), y2: y(v) }, grid);
    const t = svg("text", { x: m.l - 6, y: y(v) + 4, "text-anchor": "end" }, axis);
    t.textContent = fmt(v);
  }
  xLabels(axis, s, xt, W, H);
  // In the left margin, beside the tick labels (at the plot's left edge it sat on the first one).
  const axisLabel = svg("text", { x: m.l - 6, y: H - 8, "text-anchor": "end" }, axis);
  axisLabel.textContent = n > 1 ? "turn" : "";
  const note = document.getElementById("scale-note");
  if (note) {
    note.textContent = (log ? " Logarithmic scale: the full history grows far past the budget." : "") +
      (s.bucket_size > 1 ? ` Each point holds ${nf.format(s.bucket_size)} turns: the lines show its largest request, the shaded area reaches down to its smallest.` : "");
  }

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
  // Buckets: the area spans each bucket's smallest to largest request (a saw-tooth stays visible).
  const floor = s.bucket_size > 1 ? s.tokens_sent_min.map((v, i) => x(i).toFixed(1) + "," + y(v).toFixed(1)).reverse().join(" ")
    : `${x(n - 1).toFixed(1)},${m.t + ph} ${x(0).toFixed(1)},${m.t + ph}`;
  svg("polygon", { class: "area-sent", points: `${sentPts} ${floor}` }, el);
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
    const turn = s.first_optimized_turn;
    svg("line", { class: "opt-start", x1: xs, x2: xs, y1: m.t, y2: m.t + ph, "data-turn": turn }, el);
    const text = "Optimization starts · turn " + nf.format(turn);
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
  const indexAt = (evt) => turnIndexAt(evt, el, { W, left: m.l, pw, v: s });
  const bucket = s.bucket_size > 1;
  function showAt(evt) {
    const i = indexAt(evt);
    const xi = x(i);
    for (const node of [hover, dotFull, dotSent]) node.setAttribute("visibility", "visible");
    hover.setAttribute("x1", xi); hover.setAttribute("x2", xi);
    dotFull.setAttribute("cx", xi); dotFull.setAttribute("cy", y(s.tokens_full[i]));
    dotSent.setAttribute("cx", xi); dotSent.setAttribute("cy", y(s.tokens_sent[i]));
    const saved = s.tokens_full_sum[i] - s.tokens_sent_sum[i];
    const prov = s.provider_prompt_tokens[i];
    const r = el.getBoundingClientRect();
    const turns = s.turn_last[i] - s.turn_first[i] + 1;
    tip.show(bucket ? [
      h("b", { text: pointLabel(s, i) }), " ", h("span", { class: "muted", text: "· " + names[s.strategy[i]] }), h("br"),
      "Full history up to ", h("b", { text: nf.format(s.tokens_full[i]) }), h("br"),
      "Sent ", h("b", { text: `${nf.format(s.tokens_sent_min[i])}–${nf.format(s.tokens_sent[i])}` }), " per request", h("br"),
      h("span", { class: "muted", text: `${fmt(s.tokens_sent_sum[i])} sent over ${nf.format(turns)} requests` + (saved > 0 ? ` (−${fmt(saved)})` : "") }), h("br"),
      s.recall_tokens[i] > 0 ? h("span", null, "recalled up to ", h("b", { text: nf.format(s.recall_tokens[i]) }), h("br")) : null,
      `Budget ${nf.format(s.budget[i])} · trigger ${nf.format(s.trigger[i])} at turn ${nf.format(s.turn_last[i])}`,
      prov !== null ? h("br") : null, prov !== null ? h("span", { class: "muted", text: `Provider counted up to ${nf.format(prov)}` }) : null,
    ] : [
      h("b", { text: pointLabel(s, i) }), " ", h("span", { class: "muted", text: "· " + names[s.strategy[i]] }), h("br"),
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
  overlay.addEventListener("click", (evt) => selectTurn(s.turn_last[indexAt(evt)]));
  state.markTokens = (turn) => {
    if (pointOf(s, turn) < 0) { sel.setAttribute("visibility", "hidden"); return; }
    sel.setAttribute("x1", xt(turn)); sel.setAttribute("x2", xt(turn)); sel.setAttribute("visibility", "visible");
  };
  if (state.turn) state.markTokens(state.turn);
}
