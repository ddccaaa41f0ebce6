/* Archive: a chat out of the sidebar, kept whole (Settings → Archived chats lists it; a search finds
 * it, marked so). The sidebar row's button, the header menu's item and the note on an archived chat's
 * page (PATCH /api/conversations/<id>/ {archived}). A turn in an archived chat brings it back on the
 * server (its claim): the note goes once the list shows it again. Self-contained: main.js only imports it. */
import { refreshSidebar, removeRow } from "./sidebar.js";
import { api, errorText, nav, searchInput, state, toast } from "./state.js";

const note = document.getElementById("archived-note");
const menuItem = document.querySelector('#conv-menu [data-action="archive-current"]');

/** The page of the chat shown says whether it is archived: the note, and what the menu item does. */
function showArchived(archived) {
  if (note) note.hidden = !archived;
  if (!menuItem) return;
  menuItem.dataset.archived = archived ? "1" : "0";
  menuItem.querySelector("span").textContent = archived ? "Unarchive" : "Archive";
}

async function archiveSet(id, archived) {
  const res = await api(`/api/conversations/${id}/`, { method: "PATCH", body: { archived } });
  if (!res.ok) { toast(errorText(res.data, res.status), "error"); return false; }
  if (Number(id) === state.conversationId) showArchived(archived);
  return true;
}

/** The sidebar row's button. Archived, the row leaves the list (the focus goes to the chat next to it),
 *  unless a search lists it: the list is drawn again, marked, and the focus stays on its button. */
async function archiveRow(button) {
  const row = button.closest(".conv-item");
  const id = row.dataset.id;
  const archived = button.dataset.archived !== "1";
  if (!(await archiveSet(id, archived))) return;
  if (archived && !searchInput.value.trim()) {
    removeRow(row);
  } else {
    const hadFocus = row.contains(document.activeElement);
    await refreshSidebar();
    const again = nav.querySelector(`.conv-item[data-id="${id}"]`);
    if (hadFocus && again) {
      again.querySelector(".conv-link")?.focus(); // the row's buttons show only while it holds the focus
      again.querySelector('[data-action="archive-conversation"]')?.focus();
    }
  }
  say(archived);
}

function say(archived) {
  const words = archived ? "Chat archived: Settings → Archived chats lists it." : "Chat back in the sidebar.";
  toast(words, "info", 4000); // the toasts are a live region: read out too
}

/** The header menu's item, or the note's Unarchive: the chat shown. */
async function archiveCurrent(item) {
  const menu = item.closest(".menu");
  if (menu) {
    menu.hidden = true;
    document.getElementById("conv-menu-btn")?.setAttribute("aria-expanded", "false");
  }
  if (!state.conversationId) return;
  const archived = item.dataset.archived !== "1";
  const fromNote = note?.contains(item);
  if (!(await archiveSet(state.conversationId, archived))) return;
  await refreshSidebar();
  // The note's button is gone with the note: the focus goes to the message box, where the chat goes on.
  if (fromNote) document.getElementById("composer-input")?.focus();
  else document.getElementById("conv-menu-btn")?.focus();
  say(archived);
}

document.addEventListener("click", (e) => {
  const target = e.target.closest('[data-action="archive-conversation"], [data-action="archive-current"]');
  if (!target) return;
  e.preventDefault();
  if (target.dataset.action === "archive-conversation") archiveRow(target);
  else archiveCurrent(target);
});

// A turn here or in another tab brings the chat back (turn_claim), and the list is drawn again when a
// reply ends: the chat listed with no "Archived" mark is back. Not listed (a search typed that it does
// not match), the list cannot tell: while the note says "archived", the chat itself is asked.
document.addEventListener("longchat:sidebar-updated", async () => {
  if (!state.conversationId) return;
  const row = nav.querySelector(`.conv-item[data-id="${state.conversationId}"]`);
  if (row) {
    if (!row.querySelector(".conv-archived")) showArchived(false);
    return;
  }
  if (!note || note.hidden) return;
  const id = state.conversationId;
  const res = await api(`/api/conversations/${id}/`);
  if (res.ok && res.data && id === state.conversationId && !res.data.archived_at) showArchived(false);
});
