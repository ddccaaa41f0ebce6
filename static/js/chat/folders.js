/* Chat folders in the sidebar: New folder, a folder folded or open (remembered in this browser), and its
 * ⋯ menu's Rename and Delete (the chats are kept: back in the main list). The header menu's "Move to
 * folder…" is folder_move.js's. The lists are the server's (_conversation_list.html): each change draws
 * them again. Self-contained: main.js only imports it (folder_move.js its unfold()). */
import { announce } from "./dom.js";
import { closeMenuOf, handleActions } from "./menu_actions.js";
import { refreshSidebar } from "./sidebar.js";
import { api, confirmAction, errorText, nav, searchInput, toast } from "./state.js";

const FOLDED_KEY = "longchat.foldedFolders";
const nameDialog = document.getElementById("folder-name-dialog");
const nameForm = document.getElementById("folder-name-form");
const nameInput = document.getElementById("folder-name-input");
const nameError = document.getElementById("folder-name-error");

// --- folded or open ---------------------------------------------------------------------------------

function folded() {
  try {
    return new Set(JSON.parse(localStorage.getItem(FOLDED_KEY) || "[]").map(String));
  } catch { return new Set(); } // storage refused (a private window) or spoilt: every folder open
}

function foldedSave(ids) {
  try { localStorage.setItem(FOLDED_KEY, JSON.stringify([...ids])); } catch { /* kept for this page only */ }
}

/** The folder `id` no longer remembered as folded: one deleted, or one a chat was moved into (its chat
 *  in sight). The next refresh of the list draws it open. */
export function unfold(id) {
  const ids = folded();
  if (ids.delete(String(id))) foldedSave(ids);
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
  unfold(id);
  await refreshSidebar();
  document.getElementById("new-folder")?.focus();
  toast("Folder deleted. Its chats are back in the list.", "info", 4000);
}

const ACTIONS = {
  "new-folder": newFolder, "toggle-folder": toggleFolder, "rename-folder": renameFolder, "delete-folder": deleteFolder,
  // Cancel in either folder dialog (_folder_dialog_actions.html): this one's and folder_move.js's
  "folder-dialog-cancel": (button) => button.closest("dialog").close("cancel"),
};

handleActions(ACTIONS);

document.addEventListener("longchat:sidebar-updated", applyFolded);
applyFolded();
