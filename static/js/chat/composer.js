/* The composer: sending a message (a new chat is created on the first), /compact, the model picker. */
import { announce, buildMessage, el, icon, markLastReply, scrollToBottom } from "./dom.js";
import { draftAdopt, draftKeep } from "./draft.js";
import { foldLong } from "./fold.js";
import { refreshGauge } from "./gauge.js";
import { catchUp, followedReply } from "./history.js";
import { hasImages, imagesPayload, imagesRow, imagesStored, restoreImages, takeImages } from "./images.js";
import { compactNow, renderJob } from "./jobs.js";
import { followComing } from "./lost_start.js";
import { refreshSidebar } from "./sidebar.js";
import { api, app, busyHint, emptyState, enterSends, errorText, form, input, maxChars, messagesEl, picker, state, toast } from "./state.js";
import { runStream } from "./stream.js";
import { toNewest } from "./window.js";

/** A random idempotency key (crypto.randomUUID needs a secure context; getRandomValues does not). */
export function sendKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

export async function ensureConversation() {
  if (state.conversationId) return state.conversationId;
  const option = picker && picker.value ? picker.selectedOptions[0] : null;
  const body = option ? modelChoice(option.value) : {};
  const res = await api("/api/conversations/", { method: "POST", body });
  if (!res.ok || !res.data || !res.data.id) {
    const gone = option && modelGone(res, option);
    if (!gone) throw new Error(errorText(res.data, res.status));
    // The send is the user's to repeat, to the model the menu shows now (the default it was drawn with).
    if ([...picker.options].some((o) => o.value === picker.dataset.current)) picker.value = picker.dataset.current;
    await switchModel();
    throw new Error(`${gone} Send again to use “${picker.selectedOptions[0].textContent}”.`);
  }
  state.conversationId = res.data.id;
  app.dataset.conversationId = String(state.conversationId);
  draftAdopt();
  history.replaceState(null, "", `/c/${state.conversationId}/`);
  document.getElementById("conv-tools").hidden = false;
  if (picker) picker.dataset.current = picker.value;
  document.querySelectorAll("[data-dashboard-link]").forEach((a) => { a.href = `/c/${state.conversationId}/dashboard/`; });
  const renameBtn = document.querySelector('[data-action="rename-current"]');
  if (renameBtn) renameBtn.hidden = false;
  refreshSidebar();
  return state.conversationId;
}

export function showComposerError(text) {
  clearComposerError();
  const box = el("div", "inline-error");
  box.id = "composer-error";
  box.setAttribute("role", "alert");
  box.append(icon("alert"), el("span", "", text));
  messagesEl.after(box);
  scrollToBottom(true);
}

export function clearComposerError() {
  const old = document.getElementById("composer-error");
  if (old) old.remove();
}

/** Send `content`; `keepDraft` (a button's message, not the box's) leaves what is typed in the box. */
// The last send that had no answer at all ({pk, sent: its text and images, key}): see sendMessage.
let unanswered = null;

export async function sendMessage(content, { keepDraft = false, parent = null } = {}) {
  clearComposerError();
  // Read as the server reads it (summary_services.compact_command_parse) and the "/" menu lists it: in
  // any case ("/Compact", as a phone's keyboard capitalizes it), white space around it.
  const compact = content.match(/^\s*\/compact(?:\s+([\s\S]*))?$/i);
  if (compact) {
    input.value = "";
    autosize();
    if (!(await compactNow((compact[1] || "").trim()))) restoreText(content); // refused: the instructions are not lost
    return;
  }
  // Characters as the server counts them (code points): an emoji is one, not two UTF-16 units.
  const chars = [...content].length;
  if (maxChars && chars > maxChars) {
    showComposerError(`This message is ${chars.toLocaleString()} characters; the limit is ${maxChars.toLocaleString()}.`);
    return;
  }
  let pk;
  try {
    pk = await ensureConversation();
  } catch (err) {
    showComposerError(`Could not start a new chat: ${err.message}`);
    return;
  }
  // Read far up, the send goes where a user expects it: to the chat's end, shown again first (window.js).
  if (!(await toNewest())) return; // said; the text stays in the box
  emptyState.hidden = true;
  const images = keepDraft ? [] : takeImages(); // a button's message (Continue) takes none
  const userEl = buildMessage("user", content);
  if (images.length) userEl.querySelector(".msg-content").after(imagesRow(images));
  const asstEl = buildMessage("assistant", "");
  // Regenerate and Continue belong to the newest reply, which the one before no longer is (a send refused gives them back).
  const lastReply = messagesEl.querySelector(".msg.is-last");
  markLastReply(null);
  messagesEl.append(userEl, asstEl);
  foldLong([userEl]);
  scrollToBottom(true);
  if (!keepDraft) {
    input.value = "";
    autosize();
  }
  // One key per send: if the request is repeated (a double submit, a network retry) the server
  // stores the message once. So is the same text sent again after a send that had no answer at all:
  // the connection may have broken on the way back, the message stored.
  // The same images too: an image sent alone has no text to tell two sends apart.
  const sent = `${content}\u0000${images.map((i) => `${i.name}:${i.url.length}`).join("|")}`;
  const again = unanswered && unanswered.pk === pk && unanswered.sent === sent;
  const key = again ? unanswered.key : sendKey();
  unanswered = null;
  const body = { content, client_key: key, ...(parent ? { parent: Number(parent) } : {}) };
  if (images.length) body.images = imagesPayload(images);
  await runStream(`/api/conversations/${pk}/messages/`, body, {
    userEl,
    asstEl,
    onStored: (stored) => imagesStored(userEl, stored.images),
    onRejected(msg, status, data) {
      // Rejected before state.streaming: take the bubbles back and restore the text, unless the server
      // says it has it (sent before, its answer lost): then catchUp shows it, with its reply.
      const stored = status === 409 && Boolean(data && data.repeated);
      userEl.remove();
      asstEl.remove();
      if (lastReply?.isConnected) markLastReply(lastReply);
      if (status === 0) unanswered = { pk, sent, key };
      if (!keepDraft && !stored) { restoreText(content); restoreImages(images); }
      if (stored) toast("Your message had reached the server after all: it is shown with its reply.", "info", 6000);
      else showComposerError(msg);
      if (!messagesEl.querySelector(".msg")) emptyState.hidden = false;
      // A reply written elsewhere: shown, to wait for or stop; one not begun yet (its context being
      // packed: another tab's, or this send's own, stored already) when it comes.
      if (status === 409) catchUp().then(followComing);
    },
  });
}

/** The request body that picks a model: a config id, or the built-in offline demo model. */
export function modelChoice(value) {
  return value === "offline" ? { offline: true } : { llm_config: Number(value) };
}

/** Words for a config deleted since the page was drawn (in another tab), whose entry then leaves the
    menu; null for any other refusal. The API names the field ("llm_config: No such model configuration."). */
function modelGone(res, option) {
  if (res.status !== 400 || !res.data || !res.data.llm_config) return null;
  option.remove();
  return `“${option.textContent}” no longer exists: it was deleted (in another tab or device?).`;
}

/** The header's model selector: picks the model of a new chat, or switches an existing one. */
export async function switchModel() {
  const option = picker.selectedOptions[0];
  const previous = picker.dataset.current;
  if (!state.conversationId) {
    input.placeholder = `Message ${option.textContent}…`;
    describeChoice(option);
    return;
  }
  // Disabled while the switch is saved, the menu drops the focus: given back after, so the arrow
  // keys that changed it go on working.
  const hadFocus = document.activeElement === picker;
  picker.disabled = true;
  const res = await api(`/api/conversations/${state.conversationId}/`, { method: "PATCH", body: modelChoice(picker.value) });
  picker.disabled = false;
  if (hadFocus && (!document.activeElement || document.activeElement === document.body)) picker.focus();
  if (!res.ok) {
    const gone = modelGone(res, option);
    picker.value = previous;
    toast(gone || errorText(res.data, res.status), "error", 5000);
    return;
  }
  picker.dataset.current = picker.value;
  input.placeholder = `Message ${option.textContent}…`;
  toast(`Switched to ${option.textContent}: your next message goes to it.`);
  // The budget follows the new model's window.
  await refreshGauge();
  if (state.currentJob && state.currentJob.status === "awaiting") renderJob(state.currentJob);
}

/** A new chat's empty page says where its first message goes: the model picked, or the offline demo. */
function describeChoice(option) {
  const offline = option.value === "offline";
  document.getElementById("empty-offline").hidden = !offline;
  const about = document.getElementById("empty-model");
  about.hidden = offline;
  if (offline) return;
  about.querySelector('[data-about="name"]').textContent = option.textContent;
  about.querySelector('[data-about="model"]').textContent = option.dataset.model;
  about.querySelector('[data-about="window"]').textContent = option.dataset.window;
}

if (picker) picker.addEventListener("change", switchModel);

/** Give a refused message back to the box, before anything typed there since it was sent. */
function restoreText(content) {
  if (!content) return; // an image sent alone: its images come back, no text
  input.value = input.value.trim() ? `${content}\n\n${input.value}` : content;
  autosize();
}

/** Every change of the box's text passes here (typing, a send, a refused send given back): the height
 *  follows it, and so does the chat's draft. */
export function autosize() {
  input.style.height = "auto";
  input.style.height = `${Math.min(input.scrollHeight, window.innerHeight * 0.4)}px`;
  draftKeep();
}

input.addEventListener("input", () => {
  autosize();
  if (state.queued && !somethingToSend()) queueSend(false); // an emptied box sends nothing
});

/** Text typed, or an image attached (sent alone, with no text, as in ChatGPT or Open WebUI). */
const somethingToSend = () => Boolean(input.value.trim()) || hasImages();

/* Enter while a reply is written queues the box's text: it is sent, as it then reads, when that reply
 * is complete; stopping the reply, or emptying the box, takes it back. The busy hint says which holds. */
const busyWords = busyHint.innerHTML;

function queueSend(on) {
  state.queued = on;
  if (on) busyHint.textContent = "Your message is sent when this reply is complete; Esc or Stop ends the reply and keeps it here";
  else busyHint.innerHTML = busyWords;
}

/** Send what waits in the box, once nothing is being written or sent (the send that started the
 *  reply ends after it: both call this). */
function sendQueued() {
  if (!state.queued || state.streaming || sending || followedReply()) return;
  queueSend(false);
  // Only after a reply that ran to its end: one stopped (the user took over) or failed hands the box back.
  const last = [...messagesEl.querySelectorAll(".msg--assistant")].pop();
  if (somethingToSend() && last && last.dataset.status === "complete") form.requestSubmit();
}

document.addEventListener("longchat:reply-ended", sendQueued);

input.addEventListener("keydown", (e) => {
  if (enterSends(e)) {
    e.preventDefault();
    form.requestSubmit();
  }
});

let sending = false;

form.addEventListener("submit", async (e) => {
  e.preventDefault();
  if (state.streaming || followedReply()) {
    if (somethingToSend()) queueSend(true);
    announce(somethingToSend()
      ? "The reply is still being written: your message is sent when it ends. Esc stops the reply."
      : "The reply is still being written. Esc stops it.");
    return;
  }
  if (sending) return;
  const content = input.value;
  if (!somethingToSend()) {
    input.focus();
    return;
  }
  // Guards the gap before the stream starts (creating the conversation) against a double send.
  sending = true;
  try {
    await sendMessage(content.replace(/\s+$/, ""));
  } finally {
    sending = false;
    sendQueued();
  }
});

// Toasts show above the message box and the summary line over it: a fixed offset from the window's
// foot left them over the lines of a long draft. The offset follows the top of the box's area.
const composerArea = form.closest(".composer-wrap");
function placeToasts() {
  const above = window.innerHeight - composerArea.getBoundingClientRect().top;
  document.documentElement.style.setProperty("--toasts-bottom", `${Math.max(0, Math.round(above)) + 12}px`);
}
new ResizeObserver(placeToasts).observe(composerArea);
window.addEventListener("resize", placeToasts);
