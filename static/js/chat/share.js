/* "Share…" in the chat header's menu: a dialog that says what a read-only link publishes, makes one
 * when asked (POST /api/conversations/<id>/share/: the chat as it is now) and shows it with a Copy
 * button, this once (only its digest is stored). Opening the dialog publishes nothing. Self-contained:
 * main.js only imports it. */
import { closeMenuOf, handleActions, refocusMenuButtonOnClose } from "./menu_actions.js";
import { api, copyText, errorText, state, toast } from "./state.js";

const dialog = document.getElementById("share-dialog");
const field = document.getElementById("share-link");

refocusMenuButtonOnClose(dialog);

/** The dialog's step: "ask" (what a link publishes, Create link) or "made" (the link, Copy, Done). The
 *  template names each part's step (data-share-step), so that a part added to one is shown with it. */
function showStep(step) {
  dialog.querySelectorAll("[data-share-step]").forEach((part) => { part.hidden = part.dataset.shareStep !== step; });
}

function openDialog(item) {
  closeMenuOf(item);
  if (!state.conversationId || !dialog) return;
  field.value = "";
  showStep("ask");
  dialog.showModal();
  dialog.querySelector('[data-action="create-share-link"]').focus();
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
  showStep("made");
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
