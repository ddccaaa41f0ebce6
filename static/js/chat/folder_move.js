/* "Move to folder…" in the chat header's menu: a dialog of radio buttons, the folders the server lists
 * and "No folder", that moves the chat shown (PATCH /api/conversations/<id>/ {folder}). The dialog's
 * Cancel is folders.js's (both folder dialogs share it). Self-contained: main.js only imports it. */
import { el } from "./dom.js";
import { unfold } from "./folders.js";
import { closeMenuOf, handleActions, refocusMenuButtonOnClose } from "./menu_actions.js";
import { refreshSidebar } from "./sidebar.js";
import { api, errorText, nav, state, toast } from "./state.js";

const moveDialog = document.getElementById("folder-move-dialog");
const moveForm = document.getElementById("folder-move-form");
const choices = document.getElementById("folder-choices");
const moveItem = document.querySelector('#conv-menu [data-action="move-to-folder"]');

/** The folder the chat shown is in ("" for none): its sidebar row says it once the list was redrawn. */
function currentFolder() {
  const row = nav.querySelector(`.conv-item[data-id="${state.conversationId}"]`);
  return row ? row.dataset.folder : moveItem?.dataset.folder || "";
}

function choice(value, label, checked) {
  const row = el("label", "folder-choice");
  const radio = el("input");
  radio.type = "radio";
  radio.name = "folder";
  radio.value = value;
  radio.checked = checked;
  const text = el("span");
  text.textContent = label; // a user's name for a folder: text, never markup
  text.dir = "auto";
  row.append(radio, text);
  return row;
}

async function openMove(item) {
  closeMenuOf(item);
  if (!state.conversationId || !moveDialog) return;
  const res = await api("/api/folders/");
  if (!res.ok) { toast(errorText(res.data, res.status), "error"); return; }
  // A folder this list lacks was deleted meanwhile (another tab; or this one, the chat not in the
  // sidebar): the chat is in none now. Left unchecked, Enter on the dialog did nothing.
  const shown = currentFolder();
  const current = res.data.some((f) => String(f.id) === shown) ? shown : "";
  choices.querySelectorAll(".folder-choice").forEach((c) => c.remove());
  choices.append(choice("", "No folder", current === ""));
  for (const f of res.data) choices.append(choice(String(f.id), f.name, String(f.id) === current));
  document.getElementById("folder-move-none").hidden = res.data.length > 0;
  moveDialog.showModal();
  (choices.querySelector("input:checked") || choices.querySelector("input")).focus();
}

moveForm?.addEventListener("submit", async (e) => {
  e.preventDefault();
  const picked = choices.querySelector("input:checked");
  if (!picked) return;
  const folder = picked.value ? Number(picked.value) : null;
  const res = await api(`/api/conversations/${state.conversationId}/`, { method: "PATCH", body: { folder } });
  if (!res.ok) { toast(errorText(res.data, res.status), "error"); return; }
  if (moveItem) moveItem.dataset.folder = picked.value;
  moveDialog.close("moved");
  // Into a folder folded here, the chat shown would have no row in sight: its folder is opened.
  unfold(picked.value);
  await refreshSidebar();
  const name = picked.closest(".folder-choice").textContent;
  toast(folder === null ? "Chat moved out of its folder." : `Chat moved to “\u2068${name}\u2069”.`, "info", 3000);
});

refocusMenuButtonOnClose(moveDialog);

handleActions({ "move-to-folder": openMove });
