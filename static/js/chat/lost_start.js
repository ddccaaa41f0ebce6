/* A send whose connection closed after the server stored its message (`accepted`) but before its reply
 * had an id (`start`): the server answers it all the same, as one whose page left mid-reply (chat_turn),
 * so the page waits for that reply and follows it, rather than offer a Retry the server would refuse
 * ("already has a reply", or a reply still being written). */
import { setStatus, showError } from "./dom.js";
import { catchUp, FOLLOW_EVERY_MS } from "./history.js";
import { messagesEl } from "./state.js";

const WAITING_WORDS = "The connection closed before the reply started. Your message is kept and answered all the same: the reply shows here when it comes.";
const UNANSWERED_WORDS = "The connection closed before the reply started. Your message is kept; Retry asks again.";

// A reply's row exists as soon as its context is packed, seconds after the send: none by then, the
// server that stored the message is gone (a restart), and nothing will answer it but a Retry.
const WAIT_FOR_MS = 2 * 60 * 1000;

export function followUnstarted(article, userId) {
  setStatus(article, "error");
  if (!userId) { showError(article, UNANSWERED_WORDS, { userId }); return; }
  showError(article, WAITING_WORDS, { retry: false });
  const since = Date.now();
  const look = async () => {
    if (!article.isConnected) return; // another chat opened, or the page redrawn meanwhile
    await catchUp(); // brings the reply in, and follows it while it is written (followElsewhere)
    if (messagesEl.querySelector(`.msg--assistant[data-id][data-reply-to="${userId}"]`)) article.remove();
    else if (Date.now() - since > WAIT_FOR_MS) showError(article, UNANSWERED_WORDS, { userId });
    else setTimeout(look, FOLLOW_EVERY_MS);
  };
  setTimeout(look, FOLLOW_EVERY_MS);
}
