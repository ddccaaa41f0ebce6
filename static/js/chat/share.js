/* "Share…" in the chat header's menu: makes a read-only link of the chat as it is now
 * (POST /api/conversations/<id>/share/) and shows it in a dialog with a Copy button.
 * Self-contained: it listens for its own actions, so main.js only imports it. */
import { api, copyText, errorText, state, toast } from "./state.js";

const dialog = document.getElementById("share-dialog");
const field = document.getElementById("share-link");

function closeMenuOf(item) {
  const menu = item.closest(".menu");
  if (!menu) return;
  menu.hidden = true;
  menu.previousElementSibling?.setAttribute("aria-expanded", "false");
}

// The menu item that opened the dialog is hidden by then: focus goes back to the menu's button.
dialog?.addEventListener("close", () => document.getElementById("conv-menu-btn")?.focus());

async function shareConversation(item) {
  closeMenuOf(item);
  if (!state.conversationId || !dialog) return;
  item.disabled = true;
  const res = await api(`/api/conversations/${state.conversationId}/share/`, { method: "POST" });
  item.disabled = false;
  if (!res.ok || !res.data || !res.data.url) {
    toast(errorText(res.data, res.status), "error");
    return;
  }
  field.value = res.data.url;
  dialog.showModal();
  field.focus();
  field.select();
}

async function copyLink(button) {
  const ok = await copyText(field.value);
  const label = button.querySelector("span");
  label.textContent = ok ? "Copied" : "Copy failed";
  setTimeout(() => { label.textContent = "Copy"; }, 1500);
}

document.addEventListener("click", (e) => {
  const target = e.target.closest('[data-action="share-conversation"], [data-action="copy-share-link"]');
  if (!target) return;
  if (target.dataset.action === "share-conversation") shareConversation(target);
  else copyLink(target);
});
