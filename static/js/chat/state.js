/* Page elements and the state the chat's modules share (what changes lives in `state`). */
export const { api, errorText, toast, confirmAction, copyText, formatTokens, csrfToken, tellTabs, hearTabs, signedOut } = Longchat; // common.js (a classic script: its top-level const is global, not on window)

export const app = document.getElementById("app");
export const messagesEl = document.getElementById("messages");
export const timeline = document.getElementById("timeline");
export const form = document.getElementById("composer");
export const input = document.getElementById("composer-input");
export const sendBtn = document.getElementById("send-btn");
export const stopBtn = document.getElementById("stop-btn");
export const statusEl = document.getElementById("stream-status");
export const emptyState = document.getElementById("empty-state");
export const jobBanner = document.getElementById("job-banner");
export const maxChars = Number(app.dataset.maxChars || 0);
export const pageLoadedAt = Date.now();
export const jumpBtn = document.getElementById("jump-btn");
export const hint = document.getElementById("composer-hint");
export const busyHint = document.getElementById("composer-hint-busy");
export const nav = document.getElementById("conv-nav");
export const searchInput = document.getElementById("chat-search");
export const gaugeBtn = document.getElementById("gauge");
export const gaugePop = document.getElementById("gauge-pop");
export const picker = document.getElementById("model-select");
export const titleEl = document.getElementById("chat-title");

export const state = {
  conversationId: app.dataset.conversationId ? Number(app.dataset.conversationId) : null,
  streaming: null, // {assistantId, controller, stopRequested}
  lastGauge: null,
  summaryApi: true, // false once the summary endpoints answer 404 (not deployed)
  currentJob: null, // newest job of this conversation, as last rendered
  watchedJobId: null, // a job seen active on this page: its end refreshes the chat in place
  queued: false, // Enter was pressed while a reply was written: the box's text is sent when it ends
};


// A phone's on-screen keyboard has no Shift+Enter: on a touch screen with no mouse or trackpad, Enter
// adds a line and the send button sends (as in ChatGPT and Open WebUI). Elsewhere Enter sends.
const touchOnly = window.matchMedia("(pointer: coarse)");
const finePointer = window.matchMedia("(any-pointer: fine)");

/** Whether this keydown belongs to an input method's composition (a Japanese or Chinese IME's Enter picks
 *  the characters): Safari sends that Enter after compositionend, isComposing false, keyCode 229. */
export function composing(e) {
  return e.isComposing || e.keyCode === 229;
}

/** Whether this keydown sends the message (or the edit) being typed. */
export function enterSends(e) {
  return e.key === "Enter" && !e.shiftKey && !composing(e) && !(touchOnly.matches && !finePointer.matches);
}

/** The model a send is answered by (`accepted`'s `model`: a config's id, or "offline"), shown by the
 *  menu: a chat whose model was deleted in another tab is answered by the default, which the menu then
 *  names instead of the one deleted. */
export function modelInUse(value) {
  if (!picker || !value || picker.value === value || ![...picker.options].some((o) => o.value === value)) return;
  picker.value = value;
  picker.dataset.current = value;
  input.placeholder = `Message ${picker.selectedOptions[0].textContent}…`;
}
