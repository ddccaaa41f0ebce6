/* Optimization dashboard: charts (hand-written SVG), message map (canvas), "what the model saw",
 * requests table and summaries, all drawn from the dashboard JSON API. No chart library, no build step. */
import { drawStrategy } from "./chart_strategy.js";
import { drawTokens } from "./chart_tokens.js";
import { showCacheEstimate, showNextRequest } from "./cards.js";
import { drawMap, setupMap } from "./message_map.js";
import { setupRecords } from "./records.js";
import { api, getJSON, root, state } from "./state.js";
import { loadSummaries } from "./summaries.js";
import { selectTurn, setupTurnPicker } from "./turn.js";
import { debounce, h, rangeBounds } from "./util.js";

function drawRange() {
  drawTokens(); drawStrategy();
  root.dataset.drawn = state.range; // which range the charts show (tests wait for it)
}

function setupRange() {
  const buttons = document.querySelectorAll("[data-range]");
  if (state.series.first_optimized_turn === null) document.querySelector("[data-range=start]").hidden = true;
  if (state.series.count <= 200) document.querySelector("[data-range=latest]").hidden = true;
  const group = document.querySelector(".dash-seg");
  if (group && [...buttons].filter((b) => !b.hidden).length < 2) group.hidden = true;
  for (const b of buttons) {
    b.addEventListener("click", () => {
      const range = b.dataset.range;
      state.range = range;
      for (const o of buttons) o.setAttribute("aria-pressed", String(o === b));
      // A long conversation's series is bucketed: a zoom asks the API for the range's own points
      // (one per turn when the range holds at most 2,000 turns), once per range.
      if (range === "all" || state.series.bucket_size === 1 || state.ranges[range]) { drawRange(); return; }
      root.dataset.drawn = "";
      const [lo, hi] = rangeBounds();
      getJSON(`${api}series/?first=${lo}&last=${hi}`).then((data) => {
        state.ranges[range] = data;
        if (state.range === range) drawRange(); // unless another button was pressed meanwhile
      }).catch(() => {}); // the charts keep the range they show
    });
  }
}

async function boot() {
  const [series, map] = await Promise.all([getJSON(`${api}series/`), getJSON(`${api}map/`)]);
  state.series = series;
  state.map = map;
  showCacheEstimate(series.prompt_cache_estimate);
  state.range = "all";
  setupRange();
  drawRange();
  setupMap();
  setupTurnPicker();
  document.getElementById("summaries-more").addEventListener("click", loadSummaries);
  await Promise.all([setupRecords(), loadSummaries(), selectTurn(series.count, { say: false }), showNextRequest()]);
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

// A conversation with no request yet has nothing to draw: the page says so itself.
if (root && Number(root.dataset.turns)) {
  boot().catch((e) => {
    root.dataset.ready = "error";
    const main = document.getElementById("main");
    main.prepend(h("p", { class: "dash-error", role: "alert", text: "The dashboard data could not be loaded: " + e.message }));
  });
}
