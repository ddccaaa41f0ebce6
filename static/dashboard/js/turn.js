/* "What the model saw" for one turn: every sent entry, recall quotes and why, the summary. */
import { api, getJSON, state } from "./state.js";
import { h, messageLink, nf, strategyBadge, usd } from "./util.js";

// A turn's record id: from the series when it has that turn as a point (every turn of a short
// conversation, each bucket's last turn of a long one), else from the records API (one row).
async function recordIdOf(turn) {
  for (const s of [state.series, ...Object.values(state.ranges)]) {
    const i = s.bucket_size === 1 ? turn - s.first_turn : s.turn_last.indexOf(turn);
    if (i >= 0 && i < s.points && s.turn_last[i] === turn) return s.ids[i];
  }
  const page = await getJSON(`${api}records/?limit=1&offset=${turn - 1}`);
  return page.results[0].id;
}

// How a turn whose reply did not come whole ended (its figures read otherwise like an answered one's).
const REPLY_ENDED = { error: "Reply failed (the chat shows why)", stopped: "Reply stopped" };

/** Show turn `turn` in "What the model saw"; `say`: a screen reader is told which (not at the page's load). */
export async function selectTurn(turn, { say = true } = {}) {
  const s = state.series;
  // An empty box means the latest turn; 0 or less, the first.
  turn = Math.max(1, Math.min(s.count, Number.isFinite(turn) ? Math.round(turn) : s.count));
  state.turn = turn;
  document.getElementById("turn-input").value = turn;
  if (state.markTokens) state.markTokens(turn);
  for (const tr of document.querySelectorAll("#records-table tbody tr")) markSelected(tr, Number(tr.dataset.turn) === turn);
  const view = document.getElementById("turn-view");
  view.setAttribute("aria-busy", "true");
  let data;
  try {
    const id = await recordIdOf(turn);
    if (state.turn !== turn) return;
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
    REPLY_ENDED[r.reply_status] ? h("span", { class: "dash-reply-ended", text: REPLY_ENDED[r.reply_status] }) : null,
    // As the requests table marks it: the map and the usage card describe the path shown, not this turn's.
    r.on_active_path ? null : h("span", { class: "dash-reply-ended", text: "On another branch (edited, regenerated or switched away from)" }),
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
    const more = h("button", { type: "button", class: "dash-more", text: "Show all", hidden: "",
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
    if (e.images) note(`Sent with ${nf.format(e.images)} image${e.images === 1 ? "" : "s"}, counted in its ${nf.format(e.tokens)} tokens.`);
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
  // A range's ids are bounds: its first may be a summary's, numbered as the message before it.
  const first = (a) => {
    const n = data.numbers[String(a)];
    return n !== undefined && n === data.numbers[String(a - 1)] ? n + 1 : n ?? a;
  };
  const dropped = (data.dropped_ranges || [])
    .map(([a, b]) => [first(a), data.numbers[String(b)] ?? b])
    .filter(([x, y]) => x <= y)
    .map(([x, y]) => (x === y ? `#${nf.format(x)}` : `#${nf.format(x)}–#${nf.format(y)}`));
  const recalled = data.recalled_ids || [];
  const count = `${nf.format(data.entries.length)} message${data.entries.length === 1 ? "" : "s"}`; // a first turn sends one
  parts.push(h("p", { class: "dash-sent-foot", text:
    (data.request_shape && data.request_shape.length
      ? `${count}, ${nf.format(data.entry_tokens)} tokens, sent as one template-safe request ` +
        `(${data.request_shape.join("; ")}) of ${nf.format(r.tokens_sent)} tokens with reply priming.`
      : `${count}, ${nf.format(data.entry_tokens)} tokens + reply priming = ${nf.format(r.tokens_sent)} sent.`) +
    (data.summary ? ` Summarized: ${num(data.summary.covers_from_id)}–${num(data.summary.covers_through_id)}.` : "") +
    (recalled.length ? ` Recalled (quoted, not dropped): ${recalled.slice(0, 8).map(num).join(", ")}${recalled.length > 8 ? ` and ${recalled.length - 8} more` : ""}.` : "") +
    (dropped.length ? ` Dropped: ${dropped.slice(0, 8).join(", ")}${dropped.length > 8 ? ` and ${dropped.length - 8} more ranges` : ""}.` : "") }));
  view.replaceChildren(...parts);
  foldsOffered();
  if (say) {
    document.getElementById("turn-status").textContent =
      `Turn ${nf.format(turn)} of ${nf.format(s.count)}: ${count} sent, ${nf.format(r.tokens_sent)} tokens.`;
  }
}

// Why a recall block was sent: the query terms, then each quoted message linked to its place in
// the chat, the search's hits in bold (ranked) and the neighbours they brought along plain.
export function recallWhy(recall, num) {
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

/** "Show all" under each message sent whose text is cut, as drawn (7.5 lines at this width, zoom and text
 *  spacing): offered by its length (400 characters), a list of short lines or a phone's 300 characters
 *  lost their end with no button. */
function foldsOffered() {
  for (const body of document.querySelectorAll("#sent-list .dash-sent-body:not(.is-open)")) {
    body.nextElementSibling.hidden = body.scrollHeight <= body.clientHeight + 1;
  }
}

export function setupTurnPicker() {
  window.addEventListener("resize", foldsOffered); // a zoom, a turned phone: the lines wrap anew
  const input = document.getElementById("turn-input");
  input.addEventListener("change", () => selectTurn(input.value.trim() ? Number(input.value) : NaN));
  document.querySelector("[data-turn=prev]").addEventListener("click", () => selectTurn((state.turn || 1) - 1));
  document.querySelector("[data-turn=next]").addEventListener("click", () => selectTurn((state.turn || 0) + 1));
  document.querySelector("[data-turn=latest]").addEventListener("click", () => selectTurn(state.series.count));
}

/** The selected turn's row: a class for the eye, aria-current for a screen reader. */
export function markSelected(tr, selected) {
  tr.classList.toggle("is-selected", selected);
  if (selected) tr.setAttribute("aria-current", "true");
  else tr.removeAttribute("aria-current");
}
