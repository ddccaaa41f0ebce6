/* Chat folders in the sidebar: New folder, a folder folded or open (remembered in this browser), its
 * ⋯ menu's Rename and Delete (the chats are kept: back in the main list), and the header menu's
 * "Move to folder…" for the chat shown (PATCH /api/conversations/<id>/ {folder}). The lists are the
 * server's (_conversation_list.html): each change draws them again. Self-contained: main.js only imports it. */
import { announce, el } from "./dom.js";
import { closeMenuOf, handleActions, refocusMenuButtonOnClose } from "./menu_actions.js";
import { refreshSidebar } from "./sidebar.js";
import { api, confirmAction, errorText, nav, searchInput, state, toast } from "./state.js";

const FOLDED_KEY = "longchat.foldedFolders";
const nameDialog = document.getElementById("folder-name-dialog");
const nameForm = document.getElementById("folder-name-form");
const nameInput = document.getElementById("folder-name-input");
const nameError = document.getElementById("folder-name-error");
const moveDialog = document.getElementById("folder-move-dialog");
const moveForm = document.getElementById("folder-move-form");
const choices = document.getElementById("folder-choices");
const moveItem = document.querySelector('#conv-menu [data-action="move-to-folder"]');

// --- folded or open ---------------------------------------------------------------------------------

function folded() {
  try {
    return new Set(JSON.parse(localStorage.getItem(FOLDED_KEY) || "[]").map(String));
  } catch { return new Set(); } // storage refused (a private window) or spoilt: every folder open
}

function foldedSave(ids) {
  try { localStorage.setItem(FOLDED_KEY, JSON.stringify([...ids])); } catch { /* kept for this page only */ }
}

function showFolded(folder, isFolded) {
  folder.querySelector(".folder-toggle").setAttribute("aria-expanded", String(!isFolded));
  folder.querySelector(".folder-chats").hidden = isFolded;
}

/** The folders as this browser left them (drawn again by every refresh of the list). */
function applyFolded() {
  const ids = folded();
  nav.querySelectorAll(".folder").forEach((f) => showFolded(f, ids.has(f.dataset.folderId)));
}

function toggleFolder(button) {
  const folder = button.closest(".folder");
  const ids = folded();
  const fold = !ids.has(folder.dataset.folderId);
  if (fold) ids.add(folder.dataset.folderId); else ids.delete(folder.dataset.folderId);
  foldedSave(ids);
  showFolded(folder, fold);
}

// --- the name dialog (New folder, Rename) -----------------------------------------------------------

let nameSave = null; // what the dialog's Save does with the name typed: resolves to an error text or ""

function askName({ title, saveLabel, value, save }) {
  nameDialog.querySelector(".dialog-title").textContent = title;
  document.getElementById("folder-name-save").textContent = saveLabel;
  nameInput.value = value;
  nameError.textContent = "";
  nameInput.removeAttribute("aria-invalid");
  nameSave = save;
  nameDialog.showModal();
  nameInput.focus();
  nameInput.select();
}

nameForm?.addEventListener("submit", async (e) => {
  e.preventDefault(); // closed only once saved: a refusal is said beside the name, the dialog kept
  const problem = await nameSave?.(nameInput.value.trim());
  if (problem) {
    nameError.textContent = problem;
    nameInput.setAttribute("aria-invalid", "true");
    nameInput.focus();
    return;
  }
  nameDialog.close("saved");
});

function refusal(res) {
  const field = res.data && res.data.name;
  return Array.isArray(field) ? field.join(" ") : errorText(res.data, res.status);
}

function folderById(id) {
  return nav.querySelector(`.folder[data-folder-id="${id}"]`);
}

function newFolder(opener) {
  askName({
    title: "New folder", saveLabel: "Create", value: "",
    save: async (name) => {
      const res = await api("/api/folders/", { method: "POST", body: { name } });
      if (!res.ok) return refusal(res);
      // A search lists its matches, no folder: the one made would not be in sight, taken for a failure.
      const searched = Boolean(searchInput.value.trim());
      if (searched) {
        searchInput.value = "";
        document.getElementById("search-status").textContent = "";
      }
      await refreshSidebar();
      nameDialog.addEventListener("close", () => {
        (folderById(res.data.id)?.querySelector(".folder-toggle") || opener).focus();
      }, { once: true });
      announce(`Folder “${res.data.name}” made${searched ? "; the search was cleared to show it" : ""}.`);
      return "";
    },
  });
}

function renameFolder(item) {
  const folder = item.closest(".folder");
  const id = folder.dataset.folderId;
  closeMenuOf(item);
  askName({
    title: "Rename folder", saveLabel: "Rename", value: folder.querySelector(".folder-name").textContent,
    save: async (name) => {
      const res = await api(`/api/folders/${id}/`, { method: "PATCH", body: { name } });
      if (res.status === 404) refreshSidebar(); // deleted elsewhere: said in the dialog, gone from the list
      if (!res.ok) return refusal(res);
      await refreshSidebar();
      announce(`Folder renamed “${res.data.name}”.`);
      return "";
    },
  });
  nameDialog.addEventListener("close", () => {
    (folderById(id)?.querySelector(".folder-menu-btn") || document.getElementById("new-folder"))?.focus();
  }, { once: true });
}

async function deleteFolder(item) {
  const folder = item.closest(".folder");
  const id = folder.dataset.folderId;
  const name = folder.querySelector(".folder-name").textContent;
  closeMenuOf(item);
  // The name isolated (U+2068…U+2069): a right-to-left one would carry the quotes and "?" along.
  const ok = await confirmAction(
    `Delete the folder “\u2068${name}\u2069”? Its chats are kept: they go back to the main list.`, "Delete folder");
  if (!ok) { folderById(id)?.querySelector(".folder-menu-btn")?.focus(); return; }
  const res = await api(`/api/folders/${id}/`, { method: "DELETE" });
  if (!res.ok && res.status !== 404) { toast(errorText(res.data, res.status), "error"); return; }
  const ids = folded();
  if (ids.delete(String(id))) foldedSave(ids);
  await refreshSidebar();
  document.getElementById("new-folder")?.focus();
  toast("Folder deleted. Its chats are back in the list.", "info", 4000);
}

// --- Move to folder… (the chat shown) ---------------------------------------------------------------

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
  const ids = folded();
  if (ids.delete(picked.value)) foldedSave(ids);
  await refreshSidebar();
  const name = picked.closest(".folder-choice").textContent;
  toast(folder === null ? "Chat moved out of its folder." : `Chat moved to “\u2068${name}\u2069”.`, "info", 3000);
});

refocusMenuButtonOnClose(moveDialog);

const ACTIONS = {
  "new-folder": newFolder, "toggle-folder": toggleFolder, "rename-folder": renameFolder,
  "delete-folder": deleteFolder, "move-to-folder": openMove,
  "folder-dialog-cancel": (button) => button.closest("dialog").close("cancel"),
};

handleActions(ACTIONS);

document.addEventListener("longchat:sidebar-updated", applyFolded);
applyFolded();
