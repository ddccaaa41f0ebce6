/* The message map (canvas): every message's status in the latest request, from run-length codes. */
import { state } from "./state.js";
import { h, messageLink, nf, tooltip } from "./util.js";

export function decodeMap(mp) {
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

export function drawMap() {
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
  // Each status's colour as CSS resolves it on the canvas: a palette's light-dark() is chosen by the
  // element's color-scheme, which the custom property's own text (getPropertyValue) has not applied.
  const colors = mp.statuses.map((st) => {
    canvas.style.color = `var(--st-${st}, #999)`;
    return getComputedStyle(canvas).color;
  });
  canvas.style.removeProperty("color");
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

export function mapIndexAt(evt) {
  const g = state.mapGeom;
  const canvas = document.getElementById("message-map");
  const r = canvas.getBoundingClientRect();
  const cx = evt.clientX - r.left, cy = evt.clientY - r.top;
  const col = Math.floor(cx / (g.size + g.gap)), row = Math.floor(cy / (g.size + g.gap));
  if (col < 0 || col >= g.perRow || row < 0) return -1;
  const i = row * g.perRow + col;
  return i < g.n ? i : -1;
}

export function setupMap() {
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
