/* Chart 2: the strategy of each turn and the cumulative savings, hand-written SVG. For a bucket of
 * turns the band shows its strongest decision, a mark per lane says it truncated / summarized (how
 * many times: the tooltip), and the savings line is exact at its last turn. */
import { selectTurn } from "./turn.js";
import { chartFrame, fmt, h, nf, niceStep, pointLabel, svg, tooltip, turnAxis, turnIndexAt, xLabels } from "./util.js";

export function drawStrategy() {
  const { s, box, n, W, H, m } = chartFrame("chart-strategy", { heights: [190, 220], top: 6 });
  const bandH = 26, gap = 12;
  const pw = W - m.l - m.r;
  const areaTop = m.t + bandH + gap, ah = H - areaTop - m.b;
  const { x, xt } = turnAxis(s, m.l, pw);
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
    for (const [name, count, top] of [["summarize", s.summarizations[i], m.t], ["truncate", s.truncations[i], m.t + lane]]) {
      if (!count) continue;
      // Centred on the turn, as the line below is; the first and last stop at the plot's edges.
      const x0 = Math.max(m.l, x(i) - w / 2), x1 = Math.min(W - m.r, x(i) + w / 2);
      svg("rect", { class: "s-" + name, x: x0, y: top, width: Math.max(0.5, x1 - x0), height: lane, "data-strategy": name, "data-turn": s.turn_last[i], "data-count": count }, band);
      marks++;
    }
  }
  band.setAttribute("data-marks", marks);

  // Cumulative savings area.
  const totalSaved = s.saved_cumulative[n - 1] || 0;
  if (totalSaved <= 0) {
    const note = svg("text", { class: "band-label", x: m.l + pw / 2, y: areaTop + ah / 2, "text-anchor": "middle" }, el);
    note.textContent = "Nothing saved in these turns: everything fit under the trigger.";
    // A phone's plot is narrower than the sentence (SVG text does not wrap): two lines, centred as one.
    if (note.getComputedTextLength() > pw) {
      note.textContent = "";
      svg("tspan", { x: m.l + pw / 2, dy: "-0.6em" }, note).textContent = "Nothing saved in these turns:";
      svg("tspan", { x: m.l + pw / 2, dy: "1.2em" }, note).textContent = "everything fit under the trigger.";
    }
    xLabels(svg("g", { class: "axis" }, el), s, xt, W, H);
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
  xLabels(axis, s, xt, W, H);
  const pts = s.saved_cumulative.map((v, i) => x(i).toFixed(1) + "," + y(v).toFixed(1)).join(" ");
  svg("polygon", { class: "area-saved", points: `${x(0).toFixed(1)},${y(0)} ${pts} ${x(n - 1).toFixed(1)},${y(0)}` }, el);
  svg("polyline", { class: "line line-saved", points: pts, "data-series": "saved_cumulative", "data-points": n }, el);
  const total = s.saved_cumulative[n - 1] || 0;
  const endLabel = svg("text", { class: "opt-label", x: m.l + 8, y: areaTop + 14, "text-anchor": "start" }, el);
  endLabel.textContent = fmt(total) + " tokens not sent";

  const hover = svg("line", { class: "hover-line", y1: m.t, y2: areaTop + ah, visibility: "hidden" }, el);
  const overlay = svg("rect", { class: "overlay", x: m.l, y: m.t, width: pw, height: H - m.t - m.b }, el);
  const tip = tooltip(box);
  const indexAt = (evt) => turnIndexAt(evt, el, { W, left: m.l, pw, v: s });
  overlay.addEventListener("pointermove", (evt) => {
    const i = indexAt(evt);
    hover.setAttribute("x1", x(i)); hover.setAttribute("x2", x(i)); hover.setAttribute("visibility", "visible");
    const r = el.getBoundingClientRect();
    const decisions = s.turn_last[i] > s.turn_first[i]
      ? [s.summarizations[i] ? `${nf.format(s.summarizations[i])} summarized` : null,
        s.truncations[i] ? `${nf.format(s.truncations[i])} truncated` : null].filter(Boolean).join(", ")
      : "";
    tip.show([
      h("b", { text: pointLabel(s, i) }), " · " + (decisions || names[s.strategy[i]]), h("br"),
      "Not sent so far ", h("b", { text: fmt(s.saved_cumulative[i]) }), " tokens",
    ], (x(i) / W) * r.width, evt.clientY - r.top);
  });
  overlay.addEventListener("pointerleave", () => { hover.setAttribute("visibility", "hidden"); tip.hide(); });
  overlay.addEventListener("click", (evt) => selectTurn(s.turn_last[indexAt(evt)]));
}

// The turn (index in the drawn range) under the pointer, from a chart's geometry.
