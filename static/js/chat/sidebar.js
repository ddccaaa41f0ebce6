/* The sidebar: the conversation list and its search, pinning, renaming and deleting chats, the title. */
import { announce, el } from "./dom.js";
import { api, composing, confirmAction, errorText, hearTabs, nav, searchInput, signedOut, state, tellTabs, toast } from "./state.js";

export function setTitle(title) {
  const h1 = document.getElementById("chat-title");
  if (h1) { h1.textContent = title; h1.title = title; }
  document.title = `${title} · Longchat`;
  if (!nameInSidebar(state.conversationId, title)) refreshSidebar();
}

/** Every place the sidebar names a chat, so a screen reader's Rename and Delete say the name shown;
 *  false when the chat is not listed. */
export function nameInSidebar(id, title) {
  const rows = document.querySelectorAll(`.conv-item[data-id="${id}"]`);
  rows.forEach((row) => {
    row.querySelectorAll(".conv-title").forEach((t) => { t.textContent = title; });
    row.querySelector(".conv-link")?.setAttribute("title", title);
    row.querySelector('[data-action="rename-conversation"]')?.setAttribute("aria-label", `Rename “${title}”`);
    row.querySelector('[data-action="delete-conversation"]')?.setAttribute("aria-label", `Delete “${title}”`);
    const pin = row.querySelector('[data-action="pin-conversation"]');
    pin?.setAttribute("aria-label", `${pin.dataset.pinned === "1" ? "Unpin" : "Pin"} “${title}”`);
    const archive = row.querySelector('[data-action="archive-conversation"]');
    archive?.setAttribute("aria-label", `${archive.dataset.archived === "1" ? "Unarchive" : "Archive"} “${title}”`);
  });
  return rows.length > 0;
}

let searchTimer = null;

let searchSeq = 0;

// How many chats the list shows once "Show older chats" was pressed (0: the server's first page).
let listLimit = 0;

const searchStatus = document.getElementById("search-status");

/** Say what the search typed found (the list is not read out: it is redrawn after every reply too). */
function searchSay(query) {
  const found = nav.querySelectorAll(".conv-item").length;
  const said = !query ? ""
    : found ? `${found} chat${found === 1 ? " matches" : "s match"} “${query}”.`
      : nav.querySelector(".conv-empty")?.textContent.trim() || "";
  const note = query ? nav.querySelector(".conv-note")?.textContent.trim() : "";
  searchStatus.textContent = note ? `${said} ${note}` : said;
}

// A search typed whose answer a later redraw (another tab's change) superseded: that redraw says it.
let sayOwed = false;

/** Draw the chats list again (the search typed, a new title, a chat moved up); `say`: a search typed. */
/** Draw the list again; false when the server could not be asked or refused (the list stays as it was). */
export async function refreshSidebar({ say = false } = {}) {
  const seq = ++searchSeq;
  if (say) sayOwed = true;
  const query = searchInput.value.trim();
  const params = new URLSearchParams({ q: query, current: state.conversationId || "" });
  if (listLimit) params.set("limit", String(listLimit));
  const url = `${searchInput.form.dataset.sidebarUrl}?${params}`;
  try {
    const res = await fetch(url, { credentials: "same-origin" });
    if (!res.ok || signedOut(res)) return false;
    if (seq !== searchSeq) return true; // a later call draws it
    nav.innerHTML = await res.text(); // server-rendered, autoescaped fragment
    drawnAt = Date.now();
    if (sayOwed) { sayOwed = false; searchSay(query); }
    document.dispatchEvent(new CustomEvent("longchat:sidebar-updated"));
    return true;
  } catch { return false; /* keep the current list */ }
}

/** A reply ended: its chat moved to the top of the list (and may have a new title), here and in the
 *  browser's other tabs. A rename being typed is not swept away. */
export function listAfterReply() {
  if (!document.querySelector(".conv-rename")) refreshSidebar();
  tellTabs({ reply: state.conversationId });
}

// When the list was last drawn: a tab brought back after a while draws it again (what another device did).
let drawnAt = Date.now();
const STALE_MS = 30_000;
let heardTimer = null;

/** Another tab of this browser changed the chats list (common.js's tellTabs): drawn again here, once for
 *  a burst of changes, keeping the focus on the control it was on. */
hearTabs((change) => {
  if (change.method === "DELETE" && state.conversationId && change.path === `/api/conversations/${state.conversationId}/`) {
    toast("This chat was deleted in another tab: what it shows here is no longer kept.", "error", 10_000);
  }
  clearTimeout(heardTimer);
  heardTimer = setTimeout(redrawHeard, 150);
});

async function redrawHeard() {
  // A rename being typed here is not swept away with the list: drawn once it is done.
  if (nav.querySelector(".conv-rename")) { heardTimer = setTimeout(redrawHeard, 1000); return; }
  const focused = nav.contains(document.activeElement) ? document.activeElement : null;
  const holder = focused?.closest(".conv-item, .folder");
  const where = !holder ? null : holder.matches(".folder") ? `.folder[data-folder-id="${holder.dataset.folderId}"]`
    : `.conv-item[data-id="${holder.dataset.id}"]`;
  const action = focused?.dataset.action;
  const href = focused?.getAttribute("href"); // a search hit under the chat: the same hit, not the chat's link
  await refreshSidebar();
  if (!focused || focused.isConnected) return;
  const row = where && nav.querySelector(where);
  const link = href && row && [...row.querySelectorAll("a[href]")].find((a) => a.getAttribute("href") === href);
  if (link) link.focus();
  else if (row) focusRow(row, action);
}

/** The focus on the row's control `action` (none: its link). A chat's buttons show only while its row
 *  holds the focus: its own link takes it first, so the button can (a folder has none: its first chat's
 *  is not it). An item of a menu, closed since (drawn again), gives it to the menu's button. */
function focusRow(row, action) {
  row.querySelector(":scope > .conv-link")?.focus();
  const target = action && row.querySelector(`[data-action="${action}"]`);
  (target?.closest(".menu[hidden]")?.previousElementSibling || target)?.focus();
}

document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible" && Date.now() - drawnAt > STALE_MS) redrawHeard();
});

nav.addEventListener("click", async (e) => {
  const more = e.target.closest('[data-action="more-chats"]');
  if (!more) return;
  const listed = new Set([...nav.querySelectorAll(".conv-item")].map((row) => row.dataset.id));
  listLimit = Number(more.dataset.limit);
  more.disabled = true;
  if (!await refreshSidebar()) {
    // Not drawn again (offline, a server error): the button stayed, disabled, and nothing said why.
    more.disabled = false;
    toast("Could not list older chats: the server did not answer. Try again.", "error");
    return;
  }
  // Focus goes to the first chat just listed (the button it was on is gone), found by id: a long
  // folder's new chats come before those in no folder. A folded folder's are not shown: then the
  // list's last chat, where the button was.
  const links = [...nav.querySelectorAll(".conv-item > .conv-link")].filter((link) => link.getClientRects().length);
  (links.find((link) => !listed.has(link.closest(".conv-item").dataset.id)) || links[links.length - 1])?.focus();
});

searchInput.addEventListener("input", () => {
  clearTimeout(searchTimer);
  searchTimer = setTimeout(() => refreshSidebar({ say: true }), 220);
});

searchInput.form.addEventListener("submit", (e) => { e.preventDefault(); refreshSidebar({ say: true }); });

// A page opened from a search result keeps the search (?q=): its hits, with their snippets, again.
if (searchInput.value.trim()) refreshSidebar();

export function inlineRename(target, current, onSave) {
  const field = el("input", target.classList.contains("chat-title") ? "title-input" : "conv-rename");
  field.type = "text";
  field.value = current;
  field.maxLength = 200;
  field.setAttribute("aria-label", "Chat title");
  field.dir = "auto"; // a right-to-left title is typed from its own side
  const opener = document.activeElement;
  target.hidden = true;
  target.after(field);
  field.focus();
  field.select();
  let done = false;
  const finish = async (save) => {
    if (done) return;
    done = true;
    const value = field.value.trim();
    const hadFocus = document.activeElement === field;
    field.remove();
    target.hidden = false;
    // Enter or Esc: focus goes back where the rename was asked for (a menu that has closed since:
    // the chat's own link or button), not to the page.
    if (hadFocus) {
      const back = opener && opener.isConnected && opener.offsetParent !== null ? opener
        : target.closest(".conv-item")?.querySelector("a, button") || (target.matches("button") ? target : null);
      back?.focus();
    }
    if (save && value && value !== current) await onSave(value);
  };
  field.addEventListener("keydown", (e) => {
    if (composing(e)) return; // an input method's Enter picks its characters, its Esc drops them
    if (e.key === "Enter") { e.preventDefault(); finish(true); }
    // Stopped here: the page's own Esc would close the chats drawer (on a phone) with the rename.
    if (e.key === "Escape") { e.preventDefault(); e.stopPropagation(); finish(false); }
  });
  field.addEventListener("blur", () => finish(true));
}

export async function renameConversation(id, title) {
  const res = await api(`/api/conversations/${id}/`, { method: "PATCH", body: { title } });
  if (!res.ok) { toast(errorText(res.data, res.status), "error"); return false; }
  const saved = (res.data && res.data.title) || title;
  if (Number(id) === state.conversationId) setTitle(saved);
  else nameInSidebar(id, saved);
  return true;
}

/** Pin a chat to the top of the list, or unpin it. The list is drawn again (the chat moves between
 *  "Pinned" and its date), and the focus stays on the chat's pin button where it was on it. */
export async function pinConversation(id, pinned) {
  const hadFocus = nav.contains(document.activeElement);
  const res = await api(`/api/conversations/${id}/`, { method: "PATCH", body: { pinned } });
  if (!res.ok) { toast(errorText(res.data, res.status), "error"); return; }
  await refreshSidebar();
  const row = nav.querySelector(`.conv-item[data-id="${id}"]`);
  // Unpinned into its folder, folded: the row is not shown, its folder is.
  if (hadFocus && row && !row.getClientRects().length) row.closest(".folder")?.querySelector(".folder-toggle")?.focus();
  else if (hadFocus && row) focusRow(row, "pin-conversation");
  announce(pinned ? "Chat pinned to the top of the list." : "Chat unpinned.");
}

export async function deleteConversation(id, title) {
  // The row's buttons show only while it is hovered or holds the focus, and the dialog takes both:
  // kept shown until it closes, Delete is there for the dialog to give the focus back to.
  const row = nav.querySelector(`.conv-item[data-id="${id}"]`);
  nav.querySelectorAll(".is-confirming").forEach((other) => other.classList.remove("is-confirming"));
  row?.classList.add("is-confirming");
  // The title isolated (U+2068…U+2069, as <bdi>): a right-to-left one would carry the quotes and "?" along.
  const ok = await confirmAction(`Delete “\u2068${title}\u2069”? Its messages and records are removed for good.`);
  // Open again, the dialog asks about a Delete pressed since: that row keeps its buttons shown.
  const dialog = document.getElementById("confirm-dialog");
  if (!dialog?.open) row?.classList.remove("is-confirming");
  // The list drawn again under the dialog (another tab's change): the Delete it was to give the focus
  // back to is gone (the focus stays in the closed dialog, then falls to the page), the row's new one
  // takes it (and, the chat deleted, hands it on to the next chat).
  const redrawn = nav.querySelector(`.conv-item[data-id="${id}"]`);
  const lost = document.activeElement === document.body || dialog?.contains(document.activeElement);
  if (row && !row.isConnected && redrawn && dialog && !dialog.open && lost) focusRow(redrawn, "delete-conversation");
  if (!ok) return;
  const res = await api(`/api/conversations/${id}/`, { method: "DELETE" });
  if (!res.ok && res.status !== 404) { toast(errorText(res.data, res.status), "error"); return; }
  if (Number(id) === state.conversationId) { window.location.href = "/"; return; }
  removeRow(nav.querySelector(`.conv-item[data-id="${id}"]`)); // looked up again: the list may have been redrawn
  toast("Chat deleted.");
}

/** A deleted chat leaves the list. Its Delete button, which has the focus, goes with it: the focus
 * moves to the chat listed next (else the one before, else "New chat"), not to the page. */
export function removeRow(row) {
  if (!row) return;
  if (row.contains(document.activeElement)) {
    // A folded folder's chats are not shown: the focus cannot go to one.
    const rows = [...nav.querySelectorAll(".conv-item")].filter((r) => r === row || r.getClientRects().length);
    const neighbour = rows[rows.indexOf(row) + 1] || rows[rows.indexOf(row) - 1];
    (neighbour?.querySelector(".conv-link") || document.getElementById("new-chat")).focus();
  }
  const group = row.closest(".conv-group");
  const inFolder = Boolean(row.dataset.folder); // listed in it, or under Pinned: its folder counts it
  row.remove();
  // A date heading left over nothing goes too; with no chat left, the server's list says why
  // (none yet, none matching the search, or the older ones it had not listed).
  if (group && !group.querySelector(".conv-item")) group.remove();
  if (!nav.querySelector(".conv-item")) refreshSidebar();
  // A folder's count, and what it says once it lists none, are the server's: drawn again, focus kept.
  else if (inFolder) redrawHeard();
}
