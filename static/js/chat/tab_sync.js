/* The chat shown kept up with what is said in it elsewhere: in another tab of this browser (heard at
 * once, as its turn starts and ends), or on another device (read when this tab is shown again). Without
 * it a tab showed another's turns only once it sent itself (history.js: a send left behind) or reloaded. */
import { markLastReply, nearBottom, scrollToBottom } from "./dom.js";
import { refreshGauge } from "./gauge.js";
import { followElsewhere, streamingElsewhere } from "./history.js";
import { pathSync } from "./path_sync.js";
import { hearTabs, messagesEl, state } from "./state.js";
import { hasNewer } from "./window.js";

let running = false;
let owed = false; // heard while a read was on its way: read once more after it
let gone = false; // deleted in another tab (sidebar.js says so): there is nothing more to read

const away = () => Boolean(state.streaming || hasNewer() || messagesEl.querySelector(".msg-edit"));

/** The page's messages brought in line with the chat's path on the server; the message box, and the
 *  place read, untouched. Not while the page's own reply streams (its events draw it, and the server
 *  refuses the other tab's send meanwhile), nor while a message is being edited here (the edit could go
 *  with the version it is on: its Save, refused then, keeps the text), nor while the page is read far
 *  up (the chat's end is read anew on the way back down to it). */
async function syncShown() {
  if (!state.conversationId || gone || away()) return;
  if (running) { owed = true; return; }
  running = true;
  try {
    const stick = nearBottom();
    // A send begun here meanwhile: the messages read may hold its question, which its own bubble shows.
    const missed = await pathSync(Infinity, null, away);
    if (missed && missed.length) {
      const newest = [...messagesEl.querySelectorAll(".msg--assistant[data-id]")].pop();
      if (newest) markLastReply(newest); // Regenerate and Continue only on the newest reply
      if (stick) scrollToBottom(true);
    }
    followElsewhere(); // a reply the other tab is still writing: followed to its end, Stop reaching it
    if (missed && missed.length && !streamingElsewhere().length) refreshGauge();
  } finally {
    running = false;
  }
  if (owed) { owed = false; syncShown(); }
}

hearTabs((change) => {
  if (change.method === "DELETE" && change.path === `/api/conversations/${state.conversationId}/`) gone = true;
  const id = change.turn || change.reply || change.chat;
  if (id && Number(id) === state.conversationId) syncShown();
});

document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible") syncShown();
});
