/* Edit and branches (issue 13). A message with siblings (an edited message's versions, a reply and
 * its regenerations) shows "‹ n/m ›": switching asks the server to make that version's path active,
 * then the page shows it. Edit on your message opens it in place; Save & submit adds a version with
 * the new text and streams its reply as a send does. Handles its own clicks (imported by main.js). */
import { buildMessage, el, icon, moveFocusOff, scrollToBottom } from "./dom.js";
import { autosize, sendKey } from "./composer.js";
import { foldLong } from "./fold.js";
import { followFork } from "./fork_job.js";
import { catchUp } from "./history.js";
import { busyNow, runStream } from "./stream.js";
import { api, composing, enterSends, errorText, input, messagesEl, state, tellTabs, toast } from "./state.js";
import { hasNewer, newerAfter, setNewer, toNewest } from "./window.js";

/** Show "‹ n/m ›" on `article` for a message shape with sibling_index / sibling_count (none when 1). */
export function setSiblings(article, message) {
  if (!article || !message || !message.sibling_count) return;
  article.dataset.siblingIndex = String(message.sibling_index);
  article.dataset.siblingCount = String(message.sibling_count);
  article.querySelector(".msg-branches")?.remove();
  if (message.sibling_count < 2) return;
  const index = message.sibling_index;
  const count = message.sibling_count;
  const nav = el("span", "msg-branches");
  nav.setAttribute("role", "group");
  nav.setAttribute("aria-label", "Versions of this message");
  const button = (action, text, label, disabled) => {
    const b = el("button", "icon-btn icon-btn--sm", text);
    b.type = "button";
    b.dataset.action = action;
    b.setAttribute("aria-label", label);
    b.title = action === "branch-prev" ? "Previous version" : "Next version";
    b.disabled = disabled;
    return b;
  };
  const first = index <= 1;
  const last = index >= count;
  nav.append(
    button("branch-prev", "‹", `Previous version (${first ? `this is the first of ${count}` : `${index - 1} of ${count}`})`, first),
    el("span", "msg-branches-pos", `${index}/${count}`),
    button("branch-next", "›", `Next version (${last ? `this is the last of ${count}` : `${index + 1} of ${count}`})`, last),
  );
  const meta = article.querySelector(".msg-meta");
  meta.insertBefore(nav, meta.querySelector(".msg-model, .msg-time"));
}

/** Drop `article` and everything after it: that part of the path is now another branch. A summary
 *  shown there that covers only messages before it stays: it stays on the path (branch_hide), and its
 *  marker stands where it was written when what it covers is above the page (a long chat). */
function dropFrom(article) {
  const from = Number(article.dataset.id);
  let node = article;
  while (node) {
    const next = node.nextElementSibling;
    if (!node.matches(".summary-marker") || Number(node.dataset.coversThrough) >= from) node.remove();
    node = next;
  }
}

// The arrow a keyboard user pressed, kept across the reload a switch makes (this tab only).
const FOCUS_KEY = "longchat:branch-focus";

async function switchBranch(article, step, fromKeyboard) {
  if (busyNow() || !article.dataset.id) return;
  const index = Number(article.dataset.siblingIndex || 1) + step;
  const res = await api(`/api/messages/${article.dataset.id}/branch/`, { method: "POST", body: { index } });
  if (!res.ok) {
    // Only a chat deleted since the page drew it (another tab or device) is not found: no one deletes a message.
    const gone = "This chat no longer exists: it was deleted (in another tab or device?).";
    toast(res.status === 404 ? gone : errorText(res.data, res.status), "error", 5000);
    // Another tab went on (a version above shown, a reply being written): the page shows where it went.
    if (res.status === 400 || res.status === 409) catchUp();
    return;
  }
  if (fromKeyboard) {
    try {
      sessionStorage.setItem(FOCUS_KEY, JSON.stringify({ id: res.data.id, action: step < 0 ? "branch-prev" : "branch-next" }));
    } catch { /* storage refused: the page opens with the focus in the message box, as any load */ }
  }
  // The path below changed as a whole: the page shows the new one, this version in view.
  // Set without a hashchange, which would look for the version on this page before it reloads.
  window.history.replaceState(window.history.state, "", `${window.location.pathname}${window.location.search}#m-${res.data.id}`);
  tellTabs({ chat: state.conversationId }); // its other tabs show the version shown here (tab_sync.js)
  window.location.reload();
}

/** Branch in new chat: a new chat holding the path shown up to this message (its dates, pins and
 *  summaries, the chat's model and system prompt) opens; this chat stays as it is. A path too long to
 *  copy in the request (202) is copied by the import worker: fork_job.js follows it. */
let forking = false;
let copying = false; // a long branch's job followed: it may wait minutes for a worker
export async function forkChat(article) {
  if (copying) { toast("A new chat is still being copied from this one: wait until it is made.", "info", 5000); return; }
  if (forking) return; // a second click meanwhile would make a second new chat
  forking = true;
  toast("Making a new chat from this message…", "info", 4000);
  const res = await api(`/api/messages/${article.dataset.id}/fork/`, { method: "POST" });
  forking = res.status === 201; // the page is left on success
  if (res.status === 202) {
    copying = true;
    try { await followFork(article, res.data); } finally { copying = false; }
    return;
  }
  if (!res.ok) {
    const gone = "This chat no longer exists: it was deleted (in another tab or device?).";
    toast(res.status === 404 ? gone : errorText(res.data, res.status), "error", 6000);
    if (res.status === 400) catchUp(); // another tab switched the version this page shows
    return;
  }
  window.location.href = `/c/${res.data.id}/`;
}

/** After a switch made from the keyboard, the focus goes back to the arrows of the version now shown
 *  (the same arrow, or the other one at either end), so ‹ › can be pressed again, not to the message box. */
export function branchFocusRestore() {
  let saved = null;
  try {
    saved = JSON.parse(sessionStorage.getItem(FOCUS_KEY) || "null");
    sessionStorage.removeItem(FOCUS_KEY);
  } catch { return; }
  const nav = saved && document.getElementById(`m-${saved.id}`)?.querySelector(".msg-branches");
  if (!nav) return;
  const same = nav.querySelector(`[data-action="${saved.action}"]`);
  const target = same && !same.disabled ? same : nav.querySelector("button:not([disabled])");
  target?.focus({ preventScroll: true });
}

// Where focus was when each editor opened (its Edit button, or the message box for ↑): it goes back
// there when the editor closes, instead of falling to the page.
const editOpeners = new WeakMap();

function closeEditor(article) {
  const hadFocus = article.querySelector(".msg-edit")?.contains(document.activeElement);
  article.querySelector(".msg-edit")?.remove();
  article.classList.remove("is-editing");
  article.querySelector(".msg-content").hidden = false;
  article.querySelector(".msg-actions").hidden = false;
  const opener = editOpeners.get(article);
  editOpeners.delete(article);
  if (hadFocus || document.activeElement === document.body) {
    (opener && opener.isConnected ? opener : document.getElementById("composer-input"))?.focus();
  }
}

function openEditor(article, text = null) {
  // Opened again with the text of a refused edit, it waits for no reply: Save & submit does.
  if ((text === null && busyNow()) || !article.dataset.id || article.querySelector(".msg-edit")) return;
  const form = el("form", "msg-edit");
  const label = el("label", "visually-hidden", "Edit your message");
  const area = el("textarea", "msg-edit-input");
  area.id = `edit-${article.dataset.id}`;
  label.htmlFor = area.id;
  area.value = text ?? article.querySelector(".msg-source").value;
  // Tall enough to show the message (up to 14 lines; it scrolls beyond), never under 3.
  area.rows = Math.min(14, Math.max(3, area.value.split("\n").length + Math.floor(area.value.length / 90)));
  const save = el("button", "btn btn--sm btn--primary", "Save & submit");
  save.type = "submit";
  const cancel = el("button", "btn btn--sm", "Cancel");
  cancel.type = "button";
  cancel.dataset.action = "edit-cancel";
  const row = el("div", "msg-edit-actions");
  row.append(cancel, save);
  form.append(label, area, row);
  editOpeners.set(article, document.activeElement);
  article.classList.add("is-editing");
  article.querySelector(".msg-content").hidden = true;
  article.querySelector(".msg-actions").hidden = true;
  article.querySelector(".msg-content").after(form);
  form.addEventListener("submit", (e) => { e.preventDefault(); submitEdit(article, area.value); });
  area.addEventListener("keydown", (e) => {
    if (composing(e)) return; // an input method's Esc drops its composition, not the edit
    if (e.key === "Escape") { e.preventDefault(); e.stopPropagation(); closeEditor(article); }
    if (enterSends(e)) { e.preventDefault(); form.requestSubmit(); }
  });
  area.focus();
  area.setSelectionRange(area.value.length, area.value.length);
}

const messageBefore = (node) => {
  let prev = node && node.previousElementSibling;
  while (prev && !prev.matches(".msg[data-id]")) prev = prev.previousElementSibling;
  return prev;
};

async function submitEdit(article, content) {
  if (busyNow()) return;
  const images = article.querySelector(".msg-images"); // an edit keeps them: the text alone is new
  // With them, the text may go (the image alone), as a send's; without, it is needed.
  if (!content.trim() && !images) { toast("Type a message before sending.", "error"); return; }
  const id = article.dataset.id;
  const userEl = buildMessage("user", content.trim() ? content : "");
  if (images) userEl.querySelector(".msg-content").after(images.cloneNode(true));
  const asstEl = buildMessage("assistant", "");
  const anchor = article.previousElementSibling;
  const before = messageBefore(article); // the message it answers, whose next version takes its edit
  const parent = article.parentElement;
  const removed = [];
  for (let node = article; node; node = node.nextElementSibling) removed.push(node);
  moveFocusOff(article); // the editor goes with the old version
  dropFrom(article);
  const newer = newerAfter(); // what followed it far below is the old version's too: it goes with it
  setNewer(null);
  messagesEl.append(userEl, asstEl);
  foldLong([userEl]);
  scrollToBottom(true);
  await runStream(`/api/messages/${id}/edit/`, { content, client_key: sendKey() }, {
    userEl,
    asstEl,
    // Nothing to catch up on above it: an edit is refused unless the path up to it is the one shown, and
    // the message it follows may be simply not read yet (it was the oldest shown).
    caughtUp: true,
    onUserMessage(m) { setSiblings(userEl, m); },
    onRejected(msg, status) {
      // Nothing was stored: the path comes back as it was, the editor still open on the new text
      // (it came back with the message), and why it was refused said beside it.
      userEl.remove();
      asstEl.remove();
      if (anchor) anchor.after(...removed); else parent.prepend(...removed);
      setNewer(newer);
      showEditError(article, msg);
      // Another tab went on: shown, to wait for or stop. Its edit or switch may take this version away.
      if (status === 400 || status === 409) catchUp().then(() => { if (!article.isConnected) editKept(before, content); });
    },
  });
}

/** A refused edit whose message the catch-up took off the page (another tab edited it, or showed
 *  another version of it or of one above): the text is not lost with it. The editor opens again on
 *  the version now in its place, else the text goes to the message box. */
function editKept(before, content) {
  const words = "This message was changed in another tab meanwhile";
  let place = null;
  if (before === null) { // the first message, with no earlier ones to load: the first shown now
    if (!document.querySelector('[data-action="load-earlier"]')) place = messagesEl.querySelector(".msg[data-id]");
  } else if (before && document.getElementById(before.id)) { // by id: the catch-up may have drawn it anew
    place = document.getElementById(before.id).nextElementSibling;
    while (place && !place.matches(".msg[data-id]")) place = place.nextElementSibling;
  }
  if (place && place.matches(".msg--user")) {
    openEditor(place, content);
    showEditError(place, `${words}: your text is kept here, on the version now shown.`);
    return;
  }
  input.value = input.value.trim() ? `${content}\n\n${input.value}` : content;
  autosize();
  toast(`${words}: your text is in the message box.`, "info", 8000);
}

function showEditError(article, text) {
  const form = article.querySelector(".msg-edit");
  if (!form) { toast(text, "error", 5000); return; }
  form.querySelector(".inline-error")?.remove();
  const box = el("div", "inline-error");
  box.setAttribute("role", "alert");
  box.append(icon("alert"), el("span", "", text));
  form.querySelector(".msg-edit-actions").before(box);
  form.querySelector(".msg-edit-input").focus();
}

/** ↑ in an empty composer: open your last message for editing in place. */
export function editLastMessage() {
  // Read far up (window.js): the chat's end comes back first, the last message opened there.
  if (hasNewer() && !state.streaming) { toNewest().then((ok) => ok && editLastMessage()); return true; }
  const mine = messagesEl.querySelectorAll('.msg[data-role="user"][data-id]');
  const last = mine[mine.length - 1];
  if (!last || state.streaming) return false;
  openEditor(last);
  last.scrollIntoView({ block: "nearest" });
  return true;
}

document.addEventListener("click", (e) => {
  const target = e.target.closest("[data-action]");
  const article = target?.closest(".msg");
  if (!target || !article) return;
  const action = target.dataset.action;
  // A button pressed with Enter or Space is a click of no pointer (`detail` 0).
  if (action === "branch-prev") switchBranch(article, -1, e.detail === 0);
  else if (action === "branch-next") switchBranch(article, 1, e.detail === 0);
  else if (action === "edit-message") openEditor(article);
  else if (action === "edit-cancel") closeEditor(article);
});
