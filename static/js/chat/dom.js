/* Building and marking message elements. Model text is only ever inserted as text (textContent);
 * the only HTML inserted comes from the server, already rendered and sanitized. */
import { input, jumpBtn, messagesEl, statusEl, timeline } from "./state.js";
import { metaRow, nameMessage, setWhen } from "./meta.js";
import { retry } from "./stream.js";

export { setModel } from "./meta.js";

export const el = (tag, cls, text) => {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
};

export const icon = (name) => {
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("class", "i");
  const use = document.createElementNS("http://www.w3.org/2000/svg", "use");
  use.setAttribute("href", `#i-${name}`);
  svg.append(use);
  return svg;
};

// A live region speaks when its text changes: the same words again (Enter pressed twice during a
// reply) are cleared first, so they are said again.
export const announce = (text) => {
  if (statusEl.textContent !== text) { statusEl.textContent = text; return; }
  statusEl.textContent = "";
  setTimeout(() => { statusEl.textContent = text; }, 60);
};

/** What the live region says when a reply ends: one the page streamed, or one it followed (another
 *  tab's, or its own after a reload or a dropped connection). */
export function announceReplyEnd(status, { cut = false, error = "" } = {}) {
  if (status === "stopped") announce("Reply stopped.");
  else if (status === "error") announce(`Reply failed: ${error}`);
  // The cut is said too: "complete" would tell a screen reader the opposite of what the note shows.
  else announce(cut ? "Reply cut at the output limit: Continue asks for the rest." : "Reply complete.");
}

/** Whether the chat's end is in view: not when newer messages are left unread below (window.js). */
export function nearBottom() {
  if (document.getElementById("load-newer")) return false;
  return timeline.scrollHeight - timeline.scrollTop - timeline.clientHeight < 160;
}

/** Make a change to the timeline (`change`), keeping its end in view if it was: checked only after it,
 *  a reply drawn taller at once (its code blocks given their headers at its end) left the end out of view
 *  and out of the check's reach. The jump button says whether the end is in view. */
export function keepEnd(change) {
  const following = nearBottom();
  change();
  scrollToBottom(following);
  if (jumpBtn) jumpBtn.hidden = nearBottom();
}

export function scrollToBottom(force = false) {
  if (force || nearBottom()) {
    timeline.style.scrollBehavior = "auto";
    timeline.scrollTop = timeline.scrollHeight;
    timeline.style.scrollBehavior = "";
    // A timeline that got shorter (an edit or a regenerate replaced what followed) may not scroll at
    // all, so no scroll event says the jump button is no longer needed.
    if (jumpBtn) jumpBtn.hidden = nearBottom();
  }
}

/** `node` is about to be removed or hidden: if it holds the focus (a Regenerate, Retry or Save &
 * submit pressed in it), the message box takes it instead of the page. */
export function moveFocusOff(node) {
  if (node && node.contains(document.activeElement)) input.focus({ preventScroll: true });
}

export function enhance(root) {
  root.querySelectorAll(".md pre").forEach((pre) => {
    if (pre.parentElement.classList.contains("code-block")) return;
    const wrap = el("div", "code-block");
    const head = el("div", "code-head");
    head.append(el("span", "code-lang", pre.dataset.lang || "text"));
    const btn = el("button", "copy-btn");
    btn.type = "button";
    btn.dataset.action = "copy-code";
    btn.setAttribute("aria-label", "Copy code");
    btn.append(icon("copy"), el("span", "", "Copy"));
    head.append(btn);
    pre.replaceWith(wrap);
    wrap.append(head, pre);
  });
}

function actionButton(action, title, label, iconName) {
  const button = el("button", "icon-btn icon-btn--sm");
  button.type = "button";
  button.dataset.action = action;
  button.title = title;
  button.setAttribute("aria-label", label);
  button.append(icon(iconName));
  return button;
}

function menuItem(action, iconName, text) {
  const item = el("button");
  item.type = "button";
  item.setAttribute("role", "menuitem");
  item.dataset.action = action;
  item.append(icon(iconName), el("span", "", text));
  return item;
}

export function actionsRow(isAssistant) {
  const actions = el("div", "msg-actions");
  actions.append(actionButton("copy-message", "Copy", "Copy message", "copy"));
  if (!isAssistant) actions.append(actionButton("edit-message", "Edit", "Edit message", "edit"));
  if (isAssistant) {
    const regen = actionButton("regenerate", "Regenerate", "Regenerate reply", "refresh");
    regen.hidden = true;
    actions.append(regen);
  }
  const wrap = el("div", "menu-wrap");
  const more = el("button", "icon-btn icon-btn--sm");
  more.type = "button";
  more.dataset.action = "message-menu";
  more.setAttribute("aria-haspopup", "menu");
  more.setAttribute("aria-expanded", "false");
  more.setAttribute("aria-label", "More actions");
  more.title = "More";
  more.append(icon("more"));
  const menu = el("div", "menu");
  menu.setAttribute("role", "menu");
  menu.hidden = true;
  menu.append(
    menuItem("toggle-pin", "pin", "Pin — always send to the model"),
    menuItem("fork-chat", "fork", "Branch in new chat"),
    menuItem("read-aloud", "speaker", "Read aloud"),
  );
  wrap.append(more, menu);
  actions.append(wrap);
  return actions;
}

export function buildMessage(role, content) {
  const article = el("article", `msg msg--${role}`);
  article.dataset.role = role;
  article.dataset.pinned = "0";
  if (role === "assistant") {
    const avatar = el("div", "msg-avatar");
    avatar.setAttribute("aria-hidden", "true");
    avatar.append(icon("bolt"));
    article.append(avatar);
  }
  const body = el("div", "msg-body");
  body.append(metaRow(role));
  const contentEl = el("div", role === "user" ? "msg-content msg-content--plain" : "msg-content md is-plain");
  if (role === "user") contentEl.textContent = content;
  body.append(contentEl);
  body.append(actionsRow(role === "assistant"));
  const source = el("textarea", "msg-source");
  source.hidden = true;
  source.value = content || "";
  body.append(source);
  article.append(body);
  nameMessage(article);
  return article;
}

/** The id the server stored the message under, and when (`createdAt`, the API's ISO date; a reply's start
 *  does not say it, its end does). */
export function setMessageId(article, id, createdAt) {
  if (!id) return;
  article.dataset.id = String(id);
  article.id = `m-${id}`;
  if (createdAt) setWhen(article, createdAt);
}

// A message's place in the context ("static", "window", "evicted"; none: never sent as itself),
// as the server computes it with the optimizer's layout rule. The page never derives it.
export function setPlace(article, place) {
  if (place) article.dataset.place = place;
  else delete article.dataset.place;
}

export function setPinned(article, pinned) {
  article.dataset.pinned = pinned ? "1" : "0";
  article.classList.toggle("is-pinned", pinned);
  article.querySelector(".badge--pin").hidden = !pinned;
  article.querySelector('[data-action="toggle-pin"] span').textContent = pinned ? "Unpin" : "Pin — always send to the model";
}

export function addBadge(article, cls, text, title) {
  const meta = article.querySelector(".msg-meta");
  const badge = el("span", `badge ${cls}`, text);
  if (title) badge.title = title;
  const model = meta.querySelector(".msg-model, .msg-time");
  meta.insertBefore(badge, model);
  return badge;
}

export function setStatus(article, status) {
  article.dataset.status = status;
  article.classList.toggle("is-stopped", status === "stopped");
  article.classList.toggle("is-error", status === "error");
  article.classList.remove("is-streaming");
  article.removeAttribute("aria-busy"); // done: screen readers may read it now
  article.querySelectorAll(".badge--warn, .badge--danger, .badge--info").forEach((b) => b.remove());
  if (status === "stopped") addBadge(article, "badge--warn", "Stopped", "Stopped: the model is sent the reply as far as it went.");
  if (status === "error") addBadge(article, "badge--danger", "Failed");
}

// Regenerate and Retry act on the latest exchange only (the server refuses the others), as the
// server-rendered page shows them.
const LAST_ONLY = '[data-action="regenerate"], [data-action="retry"], [data-action="continue"]';

export function markLastReply(article) {
  // One hidden for good that holds the focus (a Continue pressed from the keyboard, its answer now the
  // latest reply) gives it to the message box, not to the page.
  messagesEl.querySelectorAll(LAST_ONLY).forEach((b) => {
    if (!article || !article.contains(b)) moveFocusOff(b);
    b.hidden = true;
  });
  messagesEl.querySelectorAll(".msg.is-last").forEach((m) => m.classList.remove("is-last"));
  if (!article) return;
  article.classList.add("is-last");
  article.querySelectorAll(LAST_ONLY).forEach((b) => { b.hidden = false; });
}

/** A reply the model ended at its output limit (finish_reason "length"), as templates/chat/_cut_note.html
 * marks it: a badge, and a note whose Continue asks for the rest (shown on the latest reply only). */
export function showCutNote(article, message) {
  article.querySelector(".msg-cut")?.remove();
  if (message.status !== "complete" || message.finish_reason !== "length") return;
  addBadge(article, "badge--warn", "Cut at output limit", "The model reached its output limit before it finished this reply.");
  const note = el("div", "msg-cut");
  const text = el("span", "msg-cut-text");
  text.append("The model reached its output limit before it finished. ", el("em", "", "Continue"),
    " asks it to go on; ", el("em", "", "Max output tokens"), " in Settings raises the limit.");
  const btn = el("button", "btn btn--sm", "Continue");
  btn.type = "button";
  btn.dataset.action = "continue";
  btn.hidden = !article.classList.contains("is-last");
  note.append(icon("alert"), text, btn);
  article.querySelector(".msg-body").insertBefore(note, article.querySelector(".msg-actions"));
}

export function showError(article, text, { retry = true, userId = null, wait = 0 } = {}) {
  let box = article.querySelector(".msg-error");
  if (!box) {
    box = el("div", "msg-error");
    box.setAttribute("role", "alert");
    box.append(icon("alert"), el("span", "msg-error-text"));
    article.querySelector(".msg-body").insertBefore(box, article.querySelector(".msg-actions"));
  }
  box.querySelector(".msg-error-text").textContent = text;
  box.querySelectorAll(".btn").forEach((b) => b.remove());
  if (retry) {
    const btn = el("button", "btn btn--sm", "Retry");
    btn.type = "button";
    btn.dataset.action = "retry";
    if (userId) article.dataset.replyTo = String(userId);
    box.append(btn);
    // The endpoint named a wait (a 429's Retry-After), which the words say: a Retry sooner is refused again.
    if (wait > 0) { btn.disabled = true; setTimeout(() => { btn.disabled = false; }, wait * 1000); }
  }
}

export function typingDots() {
  const dots = el("span", "typing");
  dots.setAttribute("aria-hidden", "true");
  dots.append(el("span"), el("span"), el("span"));
  return dots;
}

export function bannerButton(label, action, cls = "btn btn--sm") {
  const btn = el("button", cls, label);
  btn.type = "button";
  btn.dataset.action = action;
  return btn;
}

export function stateChip(text) {
  return el("span", "job-state", text);
}
