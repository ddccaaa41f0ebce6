/* Keyboard shortcuts, listed in a dialog ("?" outside a text field, or "Keyboard shortcuts" in the
   sidebar). Esc while a reply streams stops it (main.js); the rest are here. */
import { copyText, input, messagesEl, state, toast } from "./state.js";
import { editLastMessage } from "./branches.js";
import { toNewest } from "./window.js";

const dialog = document.getElementById("shortcuts-dialog");

const isMac = /Mac|iPhone|iPad/.test(navigator.platform || navigator.userAgent);

function typing(target) {
  return target instanceof HTMLElement
    && (target.isContentEditable || target.matches("input, textarea, select"));
}

export function openShortcuts() {
  if (!dialog || dialog.open) return;
  dialog.showModal();
  dialog.querySelector("button").focus();
}

async function copyLastReply() {
  if (!(await toNewest())) return; // read far up: the last reply is at the chat's end (window.js)
  const replies = messagesEl.querySelectorAll('.msg[data-role="assistant"]:not([aria-busy="true"]) .msg-source');
  const last = replies[replies.length - 1];
  if (!last || !last.value) { toast("No reply to copy yet.", "info", 1800); return; }
  const ok = await copyText(last.value);
  toast(ok ? "Last reply copied to the clipboard." : "Could not copy.", ok ? "info" : "error", 1800);
}

document.addEventListener("keydown", (e) => {
  const mod = isMac ? e.metaKey : e.ctrlKey;
  const key = e.key.length === 1 ? e.key.toLowerCase() : e.key;
  if (mod && e.shiftKey && !e.altKey && key === "o") {
    e.preventDefault();
    document.getElementById("new-chat").click();
  } else if (mod && e.shiftKey && !e.altKey && key === "c") {
    e.preventDefault();
    copyLastReply();
  } else if (e.key === "Escape" && e.shiftKey && !document.querySelector("dialog[open]")) {
    e.preventDefault();
    input.focus();
  } else if (e.key === "?" && !e.ctrlKey && !e.metaKey && !e.altKey && !typing(e.target)) {
    e.preventDefault();
    openShortcuts();
  } else if (e.key === "ArrowUp" && e.target === input && !input.value && !state.streaming && !e.shiftKey && !mod
             && !e.altKey) {
    // Your last message opens for editing in place (Save & submit makes a new version of it).
    if (editLastMessage()) e.preventDefault();
  }
});

if (dialog) {
  // The modifier as this keyboard labels it.
  for (const kbd of dialog.querySelectorAll("kbd[data-mod]")) kbd.textContent = isMac ? "⌘" : "Ctrl";
}
