/* Formatting, element and SVG builders, the tooltip and the turn range shared by the charts. */
import { SVGNS, chatUrl, state } from "./state.js";

export const nf = new Intl.NumberFormat();

export function fmt(n) {
  if (n === null || n === undefined) return "—";
  const a = Math.abs(n);
  const short = (v, digits) => v.toFixed(digits).replace(/\.0$/, "");
  if (a >= 1e9) return short(n / 1e9, a >= 1e11 ? 0 : 1) + "B";
  if (a >= 1e6) return short(n / 1e6, a >= 1e8 ? 0 : 1) + "M";
  if (a >= 1e4) return short(n / 1e3, a >= 1e5 ? 0 : 1) + "k";
  return nf.format(n);
}

export function usd(x) {
  if (x === null || x === undefined) return "—";
  if (Math.abs(x) >= 1) return "$" + x.toFixed(2);
  return "$" + x.toFixed(4);
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

// The charts draw the turns of the chosen range ("all", around the start, or the latest turns).
export function rangeBounds() {
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

export function view() {
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

export function turnIndexAt(evt, el, { W, left, pw, n }) {
  const r = el.getBoundingClientRect();
  const px = ((evt.clientX - r.left) / r.width) * W;
  return Math.max(0, Math.min(n - 1, Math.round(((px - left) / pw) * (n - 1))));
}

export function xLabels(axis, n, off, x, W, H) {
  const xstep = Math.max(1, niceStep(n, W < 600 ? 4 : 8));
  const startAt = Math.ceil((off + 1) / xstep) * xstep;
  for (let t = startAt; t <= off + n; t += xstep) {
    const label = svg("text", { x: x(t - 1 - off), y: H - 8, "text-anchor": "middle" }, axis);
    label.textContent = nf.format(t);
  }
}
