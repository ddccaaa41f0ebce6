/* Summary markers in the timeline (show, edit, discard) and pins. */
import { dialogSave } from "./dialog_save.js";
import { bannerButton, el, enhance, icon, setPinned, setPlace } from "./dom.js";
import { placeWindowMarker, refreshGauge } from "./gauge.js";
import { catchUp } from "./history.js";
import { api, app, confirmAction, errorText, messagesEl, state, toast } from "./state.js";
import { bringIntoView, hasNewer } from "./window.js";

export function summaryMeta(m) {
  const parts = [];
  if (m.covered_message_count) parts.push(`covers ${m.covered_message_count.toLocaleString()} message${m.covered_message_count === 1 ? "" : "s"}`);
  if (m.extractive) parts.push("extractive");
  else if (m.model) parts.push(m.model);
  if (m.edited) parts.push("edited");
  return parts.join(" · ");
}

/** The timeline marker of a summary, built from the API's message (its html is sanitized by the server). */
export function buildSummaryMarker(m) {
  const marker = el("details", `summary-marker${m.discarded ? " is-discarded" : ""}`);
  marker.id = `m-${m.id}`;
  marker.dataset.id = String(m.id);
  marker.dataset.kind = "summary";
  if (m.covers_through_id) marker.dataset.coversThrough = String(m.covers_through_id);
  const head = el("summary");
  const chevron = icon("chevron");
  chevron.classList.add("chevron");
  const title = el("span", "summary-marker-title", m.discarded ? "Discarded summary" : "Summary takes over here");
  const meta = el("span", "summary-marker-meta", summaryMeta(m));
  // named by its title and what it covers, as the template names it (a bare "group" says nothing)
  title.id = `m-${m.id}-title`;
  meta.id = `m-${m.id}-meta`;
  marker.setAttribute("aria-labelledby", `${title.id} ${meta.id}`);
  head.append(icon("compress"), title, meta, chevron);
  const body = el("div", "summary-body");
  const content = el("div", "md summary-content");
  content.innerHTML = m.html || ""; // server-rendered and sanitized
  body.append(content);
  if (!m.discarded) {
    const tools = el("div", "summary-tools");
    const edit = bannerButton("", "edit-summary", "btn btn--ghost btn--sm");
    edit.append(icon("edit"), document.createTextNode("Edit"));
    const discard = bannerButton("", "discard-summary", "btn btn--ghost btn--sm btn--danger-text");
    discard.append(icon("trash"), document.createTextNode("Discard"));
    tools.append(edit, discard);
    const source = el("textarea", "summary-source");
    source.hidden = true;
    source.value = m.content || "";
    body.append(tools, source);
  }
  marker.append(head, body);
  enhance(marker);
  return marker;
}

export function showSummary(m) {
  const marker = buildSummaryMarker(m);
  const existing = document.getElementById(`m-${m.id}`);
  if (existing) {
    marker.open = existing.open;
    existing.replaceWith(marker);
  } else if (!hasNewer()) { // else it comes with the newer messages read below (window.js)
    messagesEl.append(marker);
  }
  placeWindowMarker(state.lastGauge ? state.lastGauge.window_start_id : app.dataset.windowStart, state.lastGauge && state.lastGauge.strategy);
  return marker;
}

export function revealSummary(id) {
  const marker = document.getElementById(`m-${id}`);
  if (!marker) return false;
  marker.open = true;
  bringIntoView(marker);
  return true;
}

export async function togglePin(article) {
  const pinned = article.dataset.pinned !== "1";
  const res = await api(`/api/messages/${article.dataset.id}/pin/`, { method: "POST", body: { pinned } });
  if (!res.ok) {
    toast(errorText(res.data, res.status), "error");
    if (res.status === 400) catchUp(); // another tab showed another version: this page shows it too
    return;
  }
  setPinned(article, pinned);
  setPlace(article, res.data && res.data.place);
  // Older than the window it is no longer sent as itself ("evicted"): the summary holds it (or the next
  // will) and recall quotes it. One the summary in use passed over while it was pinned stays "static",
  // sent as itself until a summary takes it in.
  toast(pinned ? "Pinned: this message is always sent to the model."
    : res.data && res.data.place === "evicted"
      ? "Unpinned: it is older than the window, so it is sent word for word only when recall quotes it."
      : "Unpinned.", "info", pinned ? 3500 : 6000);
  refreshGauge();
}

const editDialog = document.getElementById("summary-dialog");
const editArea = document.getElementById("summary-edit");
const editError = document.getElementById("summary-edit-error");
let editing = null; // the marker whose summary the dialog holds

function showEditError(text) {
  editError.textContent = text;
  editError.hidden = !text;
}

export function editSummary(marker) {
  editing = marker;
  editArea.value = marker.querySelector(".summary-source").value;
  showEditError("");
  editDialog.returnValue = "";
  editDialog.showModal();
}

// Save keeps the dialog open until the server took the text, as the system prompt's does: a refusal
// (an empty text, a newer summary that came meanwhile, a lost connection) is shown beside it and the
// edit is not lost with the dialog; Cancel and Escape close it as usual.
editDialog?.querySelector("form").addEventListener("submit", async (e) => {
  if (!e.submitter || e.submitter.value !== "ok" || !editing) return;
  e.preventDefault();
  const marker = editing;
  const res = await dialogSave({
    dialog: editDialog, save: e.submitter, url: `/api/summaries/${marker.dataset.id}/`, field: "content",
    area: editArea, showError: showEditError,
  });
  if (!res) return;
  // An edit may be stored as a new summary that replaces (and discards) the one edited.
  if (res.data && Number(res.data.id) !== Number(marker.dataset.id)) markSummaryDiscarded(marker);
  const shown = showSummary(res.data);
  shown.open = true;
  // The dialog's opener was in the marker just replaced: focus goes to the marker now shown.
  shown.querySelector("summary")?.focus();
  toast("Summary saved: the model sees your text from the next message.");
  refreshGauge();
});

export function markSummaryDiscarded(marker) {
  marker.classList.add("is-discarded");
  marker.querySelector(".summary-marker-title").textContent = "Discarded summary";
  marker.querySelectorAll(".summary-tools, .summary-source").forEach((n) => n.remove());
}

export async function discardSummary(marker) {
  const ok = await confirmAction(
    "Discard this summary? The next message is packed without it (an earlier summary, if any, takes its place); no message is deleted.",
    "Discard");
  if (!ok) return;
  const id = Number(marker.dataset.id);
  const res = await api(`/api/summaries/${id}/`, { method: "DELETE" });
  if (!res.ok) { toast(errorText(res.data, res.status), "error"); return; }
  // Only this summary (and its edit chain, whose older versions an edit already discarded) goes:
  // an earlier rolling summary is in use again (showSummary re-marks which one).
  showSummary(res.data).querySelector("summary")?.focus(); // its Discard button went with the old marker
  toast("Summary discarded: the next message is packed without it.");
  refreshGauge();
}
