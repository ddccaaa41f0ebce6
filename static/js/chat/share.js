/* "Share…" in the chat header's menu: a dialog that says what a read-only link publishes, makes one
 * when asked (POST /api/conversations/<id>/share/: the chat as it is now) and shows it with a Copy
 * button, this once (only its digest is stored). Opening the dialog publishes nothing. Self-contained:
 * main.js only imports it. */
import { closeMenuOf, handleActions, refocusMenuButtonOnClose } from "./menu_actions.js";
import { api, copyText, errorText, state, toast } from "./state.js";

const dialog = document.getElementById("share-dialog");
const field = document.getElementById("share-link");
const linkRow = document.getElementById("share-link-row");
const once = document.getElementById("share-once");
const ask = document.getElementById("share-ask");
const made = document.getElementById("share-made");

refocusMenuButtonOnClose(dialog);

function openDialog(item) {
  closeMenuOf(item);
  if (!state.conversationId || !dialog) return;
  field.value = "";
  linkRow.hidden = true;
  once.hidden = true;
  made.hidden = true;
  ask.hidden = false;
  dialog.showModal();
  ask.querySelector('[data-action="create-share-link"]').focus();
}

async function createLink(button) {
  button.disabled = true;
  const res = await api(`/api/conversations/${state.conversationId}/share/`, { method: "POST" });
  button.disabled = false;
  if (!res.ok || !res.data || !res.data.url) {
    toast(errorText(res.data, res.status), "error");
    return;
  }
  field.value = res.data.url;
  ask.hidden = true;
  linkRow.hidden = false;
  once.hidden = false;
  made.hidden = false;
  field.focus();
  field.select();
}

async function copyLink(button) {
  const ok = await copyText(field.value);
  const label = button.querySelector("span");
  label.textContent = ok ? "Copied" : "Copy failed";
  setTimeout(() => { label.textContent = "Copy"; }, 1500);
}

const ACTIONS = { "share-conversation": openDialog, "create-share-link": createLink, "copy-share-link": copyLink };
handleActions(ACTIONS);
