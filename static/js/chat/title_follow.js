/* A chat named by the model: the turn's `done` said `title_pending`, and a worker writes the title a
   moment after the first reply (chatapp/chat/title_services.py). The page asks for the conversation a
   few times until its title changes, then shows it in the header, the tab and the sidebar. */
import { nameInSidebar, setTitle } from "./sidebar.js";
import { api, state, tellTabs, titleEl } from "./state.js";

// Seconds between looks: a worker usually answers within a few seconds, a busy one within a minute;
// after that the first words stay (the model call failed, or no worker runs).
const WAITS = [1.5, 2, 3, 4, 6, 8, 12, 20];

// The title the stream's events last said. A turn's events carry the title its claim read, so a title
// the model gave while the turn's reply streamed is newer than what its `done` says: said again, the
// events' title is not news, and must not put the first words back.
let streamTitle = null;

export function titleFromStream(title) {
  if (!title || title === streamTitle) return;
  streamTitle = title;
  setTitle(title);
}

export async function titleFollow(conversationId, asked) {
  for (const wait of WAITS) {
    await new Promise((resolve) => { setTimeout(resolve, wait * 1000); });
    const res = await api(`/api/conversations/${conversationId}/`);
    if (!res.ok || res.data.title_is_custom) return; // deleted, signed out, or named by the user meanwhile
    if (res.data.title !== asked) {
      titleShow(conversationId, res.data.title);
      return;
    }
  }
}

/** A reply this page followed but did not stream (another tab's, or one from before a reload) ended:
 *  the chat may have been named meanwhile, or be about to be (its `done` went to the other page). */
export async function titleCheck(conversationId) {
  const res = await api(`/api/conversations/${conversationId}/`);
  if (!res.ok) return;
  if (titleEl && res.data.title !== titleEl.textContent) titleShow(conversationId, res.data.title);
  if (res.data.title_pending) titleFollow(conversationId, res.data.title);
}

function titleShow(conversationId, title) {
  tellTabs({ title: conversationId }); // the model named it: other tabs' sidebars still say the first words
  if (state.conversationId === conversationId) {
    setTitle(title);
    return;
  }
  nameInSidebar(conversationId, title); // the user moved to another chat of this tab's
}
