/* Formatting, element and SVG builders, the tooltip and the turn range shared by the charts. */
import { SVGNS, chatUrl, state } from "./state.js";

export const nf = new Intl.NumberFormat();

export function fmt(n) {
  if (n === null || n === undefined) return "—";
  if (Math.abs(n) < 1e4) return nf.format(n);
  // Digits chosen on the value as rounded, and the unit too: 999,999 is "1M", not "1000k".
  for (const [div, suffix] of [[1e3, "k"], [1e6, "M"], [1e9, "B"]]) {
    const v = n / div;
    const text = v.toFixed(Math.abs(Number(v.toFixed(1))) < 100 ? 1 : 0);
    if (Math.abs(Number(text)) < 1000 || suffix === "B") return text.replace(/\.0$/, "") + suffix;
  }
}

export function usd(x) {
  if (x === null || x === undefined) return "—";
  if (x === 0) return "$0"; // as the server's cards write it (also -0)
  const a = Math.abs(x);
  const sign = x < 0 ? "\u2212" : "";
  if (a >= 1) return sign + "$" + a.toFixed(2);
  if (a >= 0.0001) return sign + "$" + a.toFixed(4);
  // A short turn on a cheap model costs millionths of a dollar: two significant digits, not "$0.0000"
  // (which reads as free beside the cards that priced it).
  return sign + "$" + a.toFixed(Math.min(20, 1 - Math.floor(Math.log10(a))));
}

export function svg(tag, attrs, parent) {
  const node = document.createElementNS(SVGNS, tag);
  for (const k in attrs || {}) node.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(node);
  return node;
}

export function h(tag, attrs, ...children) {
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

export function messageLink(id) { return chatUrl + "#m-" + id; }

export function niceStep(range, target) {
  const raw = range / Math.max(1, target);
  const pow = Math.pow(10, Math.floor(Math.log10(raw || 1)));
  const n = raw / pow;
  return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 5 ? 5 : 10) * pow;
}

export function debounce(fn, ms) {
  let t = null;
  return function () { clearTimeout(t); t = setTimeout(fn, ms); };
}

// Tooltip shared by a chart container; its content is built as nodes (no HTML strings).
export function tooltip(container) {
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

// The charts draw the turns of the chosen range ("all", around the start, or the latest turns), as
// 1-based inclusive turn numbers.
export function rangeBounds() {
  const n = state.series.count;
  const firstTurn = state.series.first_optimized_turn;
  if (state.range === "start" && firstTurn !== null) {
    const first = firstTurn - 1;
    const span = Math.max(60, first * 2);
    const lo = Math.max(0, first - Math.round(span / 2));
    return [lo + 1, Math.min(n, lo + span + 1)];
  }
  if (state.range === "latest") return [Math.max(1, n - 199), n];
  return [1, n];
}

// Per-point arrays of the series API: a point is one turn, or a bucket of consecutive turns
// (turn_first … turn_last) when the range holds more than the API's 2,000 points.
const POINT_KEYS = ["ids", "turn_first", "turn_last", "tokens_full", "tokens_full_sum", "tokens_sent", "tokens_sent_min",
  "tokens_sent_sum", "budget", "trigger", "provider_prompt_tokens", "strategy", "truncations", "summarizations",
  "saved_cumulative", "recall_tokens", "recall_tokens_sum"];

// The points the charts draw: cut from the whole series when it has one point per turn, else the
// range's own answer (main.js fetches it: a zoom into a long conversation gets its own points).
export function view() {
  const all = state.series;
  const [lo, hi] = rangeBounds();
  const src = all.bucket_size === 1 || state.range === "all" ? all : state.ranges[state.range] || all;
  let a = 0, b = src.points;
  if (src.bucket_size === 1 && src.points) {
    a = Math.max(0, lo - src.first_turn);
    b = Math.min(src.points, hi - src.first_turn + 1);
  }
  const v = { count: Math.max(0, b - a), strategy_codes: all.strategy_codes, bucket_size: src.bucket_size,
    first_optimized_turn: all.first_optimized_turn };
  for (const k of POINT_KEYS) v[k] = (src[k] || []).slice(a, b);
  const ft = all.first_optimized_turn;
  v.first_optimized_index = null;
  if (ft !== null && v.count && v.turn_first[0] <= ft && ft <= v.turn_last[v.count - 1]) {
    v.first_optimized_index = v.turn_last.findIndex((t) => t >= ft);
  }
  return v;
}

// A turn chart's frame: the points (view()), its emptied box, its size (lower on narrow screens, where
// the left margin for the y labels is narrower too) and margins; `top` is the chart's own top margin.
export function chartFrame(id, { heights: [narrowH, wideH], top }) {
  const s = view();
  const box = document.getElementById(id);
  box.replaceChildren();
  const W = Math.max(280, box.clientWidth);
  const narrow = W < 600;
  return { s, box, n: s.count, W, H: narrow ? narrowH : wideH, m: { l: narrow ? 44 : 56, r: 14, t: top, b: 26 } };
}

// "Turn 12" or, for a bucket, "Turns 1,201–1,232".
export function pointLabel(v, i) {
  const a = v.turn_first[i], b = v.turn_last[i];
  return a === b ? `Turn ${nf.format(b)}` : `Turns ${nf.format(a)}–${nf.format(b)}`;
}

// The x axis is the turn number of each point's last turn: x(i) for a point, xt(turn) for any turn.
export function turnAxis(v, left, pw) {
  const n = v.count;
  const t0 = n ? v.turn_last[0] : 0, t1 = n ? v.turn_last[n - 1] : 0;
  const xt = (t) => left + (t1 === t0 ? pw / 2 : ((t - t0) / (t1 - t0)) * pw);
  return { t0, t1, xt, x: (i) => xt(v.turn_last[i]) };
}

// The point holding `turn` (binary search on turn_last), or -1 outside the drawn range.
export function pointOf(v, turn) {
  if (!v.count || turn < v.turn_first[0] || turn > v.turn_last[v.count - 1]) return -1;
  let lo = 0, hi = v.count - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (v.turn_last[mid] < turn) lo = mid + 1; else hi = mid;
  }
  return lo;
}

export function percent(part, whole) {
  if (!whole) return "—";
  const p = (100 * part) / whole;
  // 99.6% is not 100%: keep a decimal near the ends.
  return (p > 99 && p < 100) || (p > 0 && p < 1) ? p.toFixed(1) + "%" : Math.round(p) + "%";
}

// "none" after the trigger fired once still sends only the window: say so.
export function strategyBadge(strategy, saved) {
  const label = strategy === "none" && saved ? "window" : strategy;
  return h("span", { class: "dash-badge st-" + label, text: label });
}

// A turn whose reply did not come whole: it failed (or was interrupted), or was stopped (null:
// answered, or still being written).
export function replyBadge(status) {
  const label = { error: "reply failed", stopped: "reply stopped" }[status];
  return label ? h("span", { class: "badge " + (status === "error" ? "badge--danger" : "badge--muted"), text: label }) : null;
}

// The point under the pointer, from a chart's geometry (the nearest by turn number).
export function turnIndexAt(evt, el, { W, left, pw, v }) {
  const r = el.getBoundingClientRect();
  const px = ((evt.clientX - r.left) / r.width) * W;
  const { t0, t1 } = turnAxis(v, left, pw);
  const turn = t0 + Math.max(0, Math.min(1, (px - left) / pw)) * (t1 - t0);
  const i = Math.max(0, pointOf(v, Math.min(t1, Math.max(t0, Math.ceil(turn)))));
  // The point before may be nearer (its last turn is left of the pointer).
  return i > 0 && turn - v.turn_last[i - 1] < v.turn_last[i] - turn ? i - 1 : i;
}

export function xLabels(axis, v, xt, W, H) {
  if (!v.count) return;
  const t0 = v.turn_last[0], t1 = v.turn_last[v.count - 1];
  const xstep = Math.max(1, niceStep(t1 - t0 + 1, W < 600 ? 4 : 8));
  for (let t = Math.ceil(t0 / xstep) * xstep; t <= t1; t += xstep) {
    const label = svg("text", { x: xt(t), y: H - 8, "text-anchor": "middle" }, axis);
    label.textContent = nf.format(t);
  }
}
