/* The summaries card: each summary, in use or replaced; edit and discard. */
import { refreshCards } from "./cards.js";
import { api, confirmAction, errorText, getJSON, request, state } from "./state.js";
import { fmt, h, messageLink, nf, usd } from "./util.js";

export function summaryItem(sm, inUse) {
  const text = h("div", { class: "dash-summary-text", text: sm.content });
  const status = h("span", { class: "dash-error", role: "status" });
  const li = h("li", { class: "dash-summary" + (sm.discarded ? " is-discarded" : ""), "data-summary": sm.id });
  const duration = sm.duration_s !== null ? sm.duration_s.toFixed(1) + " s" : "—";
  const meta = h("div", { class: "dash-summary-meta" },
    h("span", null, h("b", { text: "Summary " + (sm.number ?? "") }), sm.edited_from_number ? ` · edit of summary ${sm.edited_from_number}` : "",
      h("span", { "data-state": "", text: sm.discarded ? " · discarded" : inUse ? " · in use"
        : !sm.on_active_path ? " · on another branch" : " · replaced by a later summary" })),
    h("span", null, "Covers messages ", h("a", { href: messageLink(sm.covers_from_id), text: `${sm.covers_from_number}–${sm.covers_through_number}` }),
      sm.covered_message_count ? ` (${nf.format(sm.covered_message_count)} messages)` : ""),
    sm.source_chars ? h("span", { text: `${fmt(sm.source_chars)} → ${fmt(sm.summary_chars)} characters` }) : null,
    h("span", { text: sm.extractive ? "Extractive (no model)" : "Model: " + (sm.model || "—") }),
    sm.job_note ? h("span", { class: "dash-summary-note", text: sm.job_note }) : null,
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
      await Promise.all([reloadSummaries(), refreshCards()]);
      focusSummary(sm.id); // its button went with the list
    });
    // Only the summary in use (the newest live one on the path shown) reaches the model, so only it can be edited.
    if (inUse) actions.append(summaryEditButton(sm, li, status));
    actions.append(discard);
  }
  actions.append(status);
  li.append(meta, text, actions);
  return li;
}

export function summaryEditButton(sm, li, status) {
  const edit = h("button", { type: "button", class: "btn btn--sm btn--ghost", text: "Edit" });
  edit.addEventListener("click", () => {
    const area = h("textarea", { "aria-label": "Summary text" });
    area.value = sm.content;
    const save = h("button", { type: "button", class: "btn btn--sm btn--primary", text: "Save" });
    const cancel = h("button", { type: "button", class: "btn btn--sm", text: "Cancel" });
    const editor = h("div", null, area, h("div", { class: "dash-summary-actions" }, save, cancel));
    li.append(editor);
    // Hidden, not disabled: a disabled button drops the keyboard's focus to the page.
    edit.hidden = true;
    area.focus();
    cancel.addEventListener("click", () => { editor.remove(); edit.hidden = false; edit.focus(); });
    save.addEventListener("click", async () => {
      const saved = await summaryCall(sm.id, "PATCH", { content: area.value }, status);
      if (!saved) return;
      // The edit is a new summary version and this one is now discarded: list them afresh.
      await Promise.all([reloadSummaries(), refreshCards()]);
      const item = document.querySelector(`#summaries [data-summary="${saved.id}"] [role=status]`);
      if (item) item.textContent = "Saved.";
      focusSummary(saved.id);
    });
  });
  return edit;
}

/** Keyboard focus on a summary of the list drawn afresh (its heading line), not lost to the page. */
function focusSummary(id) {
  const item = document.querySelector(`#summaries [data-summary="${id}"]`);
  if (!item) return;
  item.tabIndex = -1;
  item.focus();
}

export async function summaryCall(id, method, body, status) {
  status.textContent = "";
  const r = await request(`/api/summaries/${id}/`, { method, body });
  if (r.ok) return r.data || {};
  status.textContent = `Could not ${method === "DELETE" ? "discard" : "save"}: ${errorText(r.data, r.status)}`;
  return null;
}

export async function loadSummaries() {
  const ul = document.getElementById("summaries");
  const btn = document.getElementById("summaries-more");
  // "Show more" goes on before the last summary listed (the answer's `next`), not by an offset: one
  // written meanwhile (a turn in another tab) shifted the offsets, and the list showed a summary twice.
  const before = state.summariesBefore ? `&before=${state.summariesBefore}` : "";
  const data = await getJSON(`${api}summaries/?limit=5${before}`);
  if (!state.summariesBefore && !data.results.length) ul.replaceChildren(h("li", { class: "dash-empty", text: "No summaries yet." }));
  // The server names the summary in use: the newest live one may be on another branch (an edit or a
  // switch took what it covers off the path), and the one in use then reads as replaced by it.
  for (const sm of data.results) ul.append(summaryItem(sm, sm.in_use));
  state.summariesBefore = data.next ? new URL(data.next, location.href).searchParams.get("before") : null;
  ul.dataset.count = data.count;
  const pressed = document.activeElement === btn;
  btn.hidden = !data.next;
  // The oldest listed hides the button pressed: the keyboard's focus goes to the first summary it
  // brought, not to the page's start.
  if (pressed && btn.hidden && data.results.length) focusSummary(data.results[0].id);
}

export function reloadSummaries() {
  document.getElementById("summaries").replaceChildren();
  state.summariesBefore = null;
  return loadSummaries();
}
