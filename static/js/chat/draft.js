/* The message box's unsent text, kept per chat for this tab, so that a reload or a look at another
 * chat does not lose it. sessionStorage: it ends with the tab, and its key names the account, so a
 * draft is never offered to someone else signed in later in the same tab. */
import { app, input, state } from "./state.js";

const KEEP_AFTER_MS = 300; // typing writes the draft once it pauses, not at every key
let timer = null;

const keyOf = (chat) => `longchat:draft:${app.dataset.user || ""}:${chat || "new"}`;

function store() {
  try {
    return window.sessionStorage;
  } catch {
    return null; // storage refused (privacy settings): drafts are not kept
  }
}

function write() {
  timer = null;
  const drafts = store();
  if (!drafts) return;
  try {
    if (input.value.trim()) drafts.setItem(keyOf(state.conversationId), input.value);
    else drafts.removeItem(keyOf(state.conversationId));
  } catch {
    // storage full: the text stays in the box, only not across a reload
  }
}

/** The box's text changed: keep it as this chat's draft (an empty box keeps none). */
export function draftKeep() {
  if (timer) clearTimeout(timer);
  timer = setTimeout(write, KEEP_AFTER_MS);
}

/** An empty box takes this chat's draft, if one was kept. */
export function draftRestore() {
  const text = store()?.getItem(keyOf(state.conversationId));
  if (text && !input.value) input.value = text;
}

/** A new chat got its id: the draft is that chat's from now on, no longer the new-chat page's. */
export function draftAdopt() {
  store()?.removeItem(keyOf(null));
  write();
}

window.addEventListener("pagehide", () => { if (timer) { clearTimeout(timer); write(); } });
