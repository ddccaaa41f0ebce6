/* The context gauge and where the context starts in the timeline (window, summaries, recall). */
import { addBadge, el } from "./dom.js";
import { renderJob } from "./jobs.js";
import { api, formatTokens, gaugeBtn, jobBanner, messagesEl, state } from "./state.js";

export const STRATEGY_WORDS = {
  none: "Everything fits: sent verbatim",
  truncate: "Oldest turns dropped to fit",
  summarize: "Older turns summarized",
};

// A turn that cut nothing new still leaves out what an earlier cut did: said so, beside a reason
// that starts "no cut".
function strategyWords({ strategy, reason, shortened_message_ids: shortened, prompt_shortened: promptShortened }) {
  if (strategy === "truncate" && (reason || "").startsWith("no cut")) return "Older turns left out (the window is kept)";
  if (strategy === "none" && ((shortened || []).length || promptShortened)) return "Nothing left out; what is too long is sent shortened";
  return STRATEGY_WORDS[strategy] || strategy;
}

export function updateGauge(g) {
  if (!gaugeBtn || !g) return;
  state.lastGauge = { ...(state.lastGauge || {}), ...g };
  // The reason is the last request's; once the gauge projects another strategy it no longer explains it.
  if (state.lastGauge.reasonFor !== state.lastGauge.strategy) state.lastGauge.reason = null;
  const tokens = Number(g.tokens || 0);
  const budget = Number(g.budget || 0);
  const ratio = g.ratio !== undefined && g.ratio !== null ? Number(g.ratio) : budget ? tokens / budget : 0;
  const pct = Math.max(0, Math.min(100, Math.round(ratio * 100)));
  document.getElementById("gauge-fill").style.width = `${Math.max(pct, tokens ? 2 : 0)}%`;
  const shown = `${g.estimated ? "≈" : ""}${formatTokens(tokens)} / ${formatTokens(budget)}`;
  document.getElementById("gauge-text").textContent = shown;
  gaugeBtn.classList.toggle("is-warn", ratio >= 0.7 && ratio < 0.9);
  gaugeBtn.classList.toggle("is-danger", ratio >= 0.9);
  // The name starts with the words shown, which a voice-control user says to press it.
  gaugeBtn.setAttribute("aria-label",
    `Context ${shown}: the next request uses ${tokens.toLocaleString()} of ${budget.toLocaleString()} tokens (${pct}%)`);
  gaugeBtn.title = `Next request: ${tokens.toLocaleString()} of ${budget.toLocaleString()} tokens (${pct}%)`;
  const dl = document.getElementById("gauge-details");
  dl.replaceChildren();
  const row = (k, v) => { dl.append(el("dt", "", k), el("dd", "", v)); };
  row("Next request", `${tokens.toLocaleString()} tokens`);
  row("Budget", `${budget.toLocaleString()} tokens`);
  if (g.history_tokens !== undefined && g.history_tokens !== tokens) {
    row("Whole history", `${Number(g.history_tokens).toLocaleString()} tokens`);
  }
  row("Used", pct === 0 && tokens > 0 ? "under 1%" : `${pct}%`);
  if (state.lastGauge.strategy) row("Strategy", strategyWords(state.lastGauge));
  row("Counting", state.lastGauge.estimated ? "estimated (a model unknown to the tokenizer, or counts made for another model)" : "exact");
  if (g.prompt_shortened) row("System prompt", "too long for this budget: sent shortened (its beginning and end)");
  const shortened = g.shortened_message_ids || [];
  if (shortened.length) row("Shortened", `${shortened.length} message${shortened.length === 1 ? "" : "s"} too long for this budget: sent as ${shortened.length === 1 ? "its" : "their"} beginning and end`);
  markShortened(shortened);
  if (state.lastGauge.recall) row("Recalled", recallWords(state.lastGauge.recall) + " for your last message");
  if (state.lastGauge.reason) {
    const reason = el("dd", "gauge-reason", state.lastGauge.reason);
    dl.append(reason);
  }
  if ("window_start_id" in g) placeWindowMarker(g.window_start_id, state.lastGauge.strategy);
  // A pending "compact now?" question quotes the gauge: keep the two in step.
  if (state.currentJob && state.currentJob.status === "awaiting" && !jobBanner.hidden) renderJob(state.currentJob);
}

/** Mark the messages the request sends shortened (too long for the budget), where the page shows them. */
function markShortened(ids) {
  const wanted = new Set(ids.map(String));
  messagesEl.querySelectorAll(".badge--shortened").forEach((b) => { if (!wanted.has(b.closest(".msg").dataset.id)) b.remove(); });
  for (const id of wanted) {
    const article = document.getElementById(`m-${id}`);
    if (article && !article.querySelector(".badge--shortened")) {
      addBadge(article, "badge--accent badge--shortened", "Sent shortened",
        "Too long for this model's window beside the rest: the model gets its beginning and end (the dashboard's record shows what it saw).");
    }
  }
}

// The start event's context is this request's decision; its recall (or null) holds until the next one.
export function showDecision(ctx) {
  state.lastGauge = {
    ...(state.lastGauge || {}), strategy: ctx.strategy, reason: ctx.reason, reasonFor: ctx.strategy,
    recall: ctx.recall || null,
  };
}

// "4 earlier messages (312 tokens)": the old messages the recall block quoted for one request.
export function recallWords(recall) {
  const n = Number(recall.messages || 0);
  return `${n.toLocaleString()} earlier message${n === 1 ? "" : "s"} (${Number(recall.tokens || 0).toLocaleString()} tokens)`;
}

// Messages the latest request quoted are marked where they stand in the timeline.
export function markRecalled() {
  messagesEl.querySelectorAll(".msg.is-recalled").forEach((m) => m.classList.remove("is-recalled"));
  const recall = state.lastGauge && state.lastGauge.recall;
  if (!recall || !recall.ids) return 0;
  let shown = 0;
  for (const id of recall.ids) {
    const item = document.getElementById(`m-${id}`);
    if (item && item.classList.contains("msg")) { item.classList.add("is-recalled"); shown += 1; }
  }
  return shown;
}

export async function refreshGauge() {
  if (!state.conversationId || !gaugeBtn) return;
  const res = await api(`/api/conversations/${state.conversationId}/context/`);
  if (res.ok && res.data) updateGauge(res.data);
  else if (!state.lastGauge) document.getElementById("gauge-text").textContent = "–";
}

/** Summaries are stored when they finish; show each right after the last message it covers. */
export function placeSummaries() {
  messagesEl.querySelectorAll(".summary-marker[data-covers-through]").forEach((marker) => {
    const last = document.getElementById(`m-${marker.dataset.coversThrough}`);
    if (last && last.parentElement === messagesEl && last.nextElementSibling !== marker) last.after(marker);
  });
  markSummaryStates();
}

/** Only the newest summary not discarded reaches the model: older ones (folded into it) are shown
 *  as replaced, without the tools that would suggest they are in use. */
export function markSummaryStates() {
  const live = [...messagesEl.querySelectorAll(".summary-marker:not(.is-discarded)")];
  const inUse = live.reduce((best, m) => (!best || Number(m.dataset.id) > Number(best.dataset.id) ? m : best), null);
  for (const marker of live) {
    const replaced = marker !== inUse;
    marker.classList.toggle("is-replaced", replaced);
    marker.querySelector(".summary-marker-title").textContent =
      replaced ? "Replaced by a later summary" : "Summary takes over here";
    marker.querySelectorAll(".summary-tools").forEach((tools) => { tools.hidden = replaced; });
  }
}

export function placeWindowMarker(windowStart, strategy) {
  placeSummaries();
  messagesEl.querySelectorAll(".window-marker").forEach((m) => m.remove());
  markRecalled();
  const ws = Number(windowStart || 0);
  const items = [...messagesEl.querySelectorAll(":scope > .msg[data-id]")];
  const coveredThrough = Number((state.lastGauge && state.lastGauge.summary_through_id) || 0);
  let anchor = null;
  let outside = 0;
  let uncovered = 0;
  for (const item of items) {
    const id = Number(item.dataset.id);
    if (ws && id >= ws && !anchor) anchor = item;
    // The static layer stays whatever the window; the server said which messages belong to it.
    // The window start moves with every gauge update, so the rest is placed against it here.
    const place = item.dataset.place;
    const out = Boolean(ws) && !anchor && (place === "window" || place === "evicted");
    // Changed only where it changes: taken off and put back on every message, the mark restyled the
    // whole timeline at each page loaded above it (seconds a click, thousands of messages in).
    if (item.classList.contains("is-outside") !== out) item.classList.toggle("is-outside", out);
    if (out) {
      outside += 1;
      if (id > coveredThrough) uncovered += 1;
    }
  }
  if (!ws) return;
  const hasEarlier = !!document.querySelector('[data-action="load-earlier"]');
  if (!anchor || (!outside && !hasEarlier)) return;
  // Say what the next request really does with them: the summary it sends covers up to
  // `summary_through_id`; anything after that is left out (until a new summary is written, or for
  // good today when the daily limit of automatic summaries turned summaries into truncation).
  const quota = state.lastGauge && state.lastGauge.summary_quota_reached;
  const later = quota ? " (today's automatic summaries are used up, so they are truncated)"
    : strategy === "summarize" ? " until the next summary is written" : "";
  let how;
  if (coveredThrough && !uncovered) how = "a summary stands in for them";
  else if (coveredThrough) how = `a summary stands in for the older ones; the later ones are left out${later}`;
  else how = `they were left out to fit the window${later}`;
  const marker = el("div", "window-marker");
  marker.setAttribute("role", "separator");
  const recall = state.lastGauge && state.lastGauge.recall;
  const recalled = recall && recall.messages
    ? `; ${recallWords(recall)} ${recall.messages === 1 ? "was" : "were"} recalled for the latest one` : "";
  marker.append(el("span", "", `Earlier messages are not sent verbatim — ${how}${recalled}`));
  anchor.before(marker);
}

// "Compact now?" speaks of the whole history against the budget (what the trigger measures),
// not of the already-optimized next request.
/** The gauge's two figures against the budget: the whole history (what the trigger measures and
 * "compact now?" speaks of) and the next request as optimized (what the gauge bar shows). */
export function gaugePercents() {
  if (!state.lastGauge || !state.lastGauge.budget) return null;
  const next = Number(state.lastGauge.tokens || 0) / Number(state.lastGauge.budget);
  const history = state.lastGauge.history_ratio !== undefined && state.lastGauge.history_ratio !== null
    ? Number(state.lastGauge.history_ratio) : next;
  return { history: Math.round(history * 100), next: Math.round(next * 100) };
}
