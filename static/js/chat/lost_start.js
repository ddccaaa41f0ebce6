/* A reply the page waits for before it has an id, which the server writes all the same (chat_turn):
 * that of a send whose connection closed after the server stored its message (`accepted`) but before
 * the reply began (`start`), that of a page opened (a reload) while the reply's context is packed, and
 * that a send refused (409, composer.js) finds on its way: this send's own, stored already (`repeated`),
 * or another tab's.
 * The page catches up until the reply is there, then follows it as one from another tab, rather than
 * show the message unanswered, or offer a Retry the server would refuse ("already has a reply"). */
import { setStatus, showError } from "./dom.js";
import { catchUp, FOLLOW_EVERY_MS } from "./history.js";
import { messagesEl } from "./state.js";

const WAITING_WORDS = "The connection closed before the reply started. Your message is kept and answered all the same: the reply shows here when it comes.";
const UNANSWERED_WORDS = "The connection closed before the reply started. Your message is kept; Retry asks again.";

// A reply's row exists as soon as its context is packed, seconds after the send: none by then, the
// server that stored the message is gone (a restart), and nothing will answer it but a Retry.
const WAIT_FOR_MS = 2 * 60 * 1000;

/** Catch up every FOLLOW_EVERY_MS while `live()` until the reply to user message `userId` is on the page
 *  (catchUp follows it while it is written), WAIT_FOR_MS at most; then `ended(whether it came)`. */
function replyAwait(userId, live, ended) {
  const since = Date.now();
  const look = async () => {
    if (!live()) return; // another chat opened, or the page redrawn meanwhile
    await catchUp();
    if (messagesEl.querySelector(`.msg--assistant[data-id][data-reply-to="${userId}"]`)) ended(true);
    else if (Date.now() - since > WAIT_FOR_MS) ended(false);
    else setTimeout(look, FOLLOW_EVERY_MS);
  };
  setTimeout(look, FOLLOW_EVERY_MS);
}

/** The page's own reply, lost before it had an id: `article` says it is coming, and gives way to it. */
export function followUnstarted(article, userId) {
  const unanswered = () => { setStatus(article, "error"); showError(article, UNANSWERED_WORDS, { userId }); };
  if (!userId) { unanswered(); return; }
  showError(article, WAITING_WORDS, { retry: false }); // no "Failed" badge: nothing failed yet
  replyAwait(userId, () => article.isConnected, (came) => (came ? article.remove() : unanswered()));
}

/** The chat's last message, when it waits for its reply's context (data-reply-coming, or a send found stored). */
export function followComing() {
  const tail = [...messagesEl.querySelectorAll(".msg[data-id]")].pop();
  if (tail && tail.dataset.role === "user") replyAwait(Number(tail.dataset.id), () => tail.isConnected, () => {});
}
