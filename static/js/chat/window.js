/* The messages the page renders are a bounded run of the chat's path: read far up ("Load earlier
 * messages"), the newest ones shown are dropped below the view and "Load newer messages" reads them
 * back, page by page, dropping the oldest ones above in turn. A send, the jump button, ↑ and a link to
 * a message bring back the run they need (the chat's end, or the page around the message). Before this,
 * every page read stayed: 12,000 messages up, a tab held hundreds of thousands of nodes and each load
 * restyled them all (bench/dom_window.py, README "Long conversations"). Handles its own clicks. */
import { announce, el, enhance, nearBottom, scrollToBottom } from "./dom.js";
import { foldLong } from "./fold.js";
import { placeWindowMarker } from "./gauge.js";
import { app, jumpBtn, messagesEl, signedOut, state, timeline, toast } from "./state.js";

// At most this many messages rendered (summary markers count as one). Three pages of the server's 100
// (views.TIMELINE_PAGE): the page read and a whole page either side of it, so a load in either direction
// drops only what is at least a page away from the view (a screen shows a few to a few dozen
// messages), while the DOM stays near 50,000 nodes of markdown, tables and code (bench/dom_window.py:
// ~160 nodes a message), where a load or a restyle stays well under a frame's budget on a laptop.
export const MAX_RENDERED = 300;

// What must not be dropped: the page's own reply being written (no id yet, or streaming), one followed
// from another tab, a message open in its editor (its text typed). The run waits to be trimmed.
const KEEP = '.msg:not([data-id]), .is-streaming, [data-status="streaming"], .is-editing';

const shown = () => [...messagesEl.querySelectorAll(":scope > [data-id]")];

/** Whether newer messages of the path exist below those rendered (dropped, or never read). */
export const hasNewer = () => Boolean(document.getElementById("load-newer"));

/** A fragment of the timeline (views.chat_messages_before: `before`, `after`, `since`, or none for the
 *  newest page) as nodes, with its response; null when it could not be read. */
let goneSaid = false;

export async function fragment(query) {
  let res;
  try {
    res = await fetch(`/c/${state.conversationId}/messages/?${query}`, { credentials: "same-origin" });
  } catch (_) {
    return null;
  }
  if (res.status === 404 && !goneSaid) {
    // Deleted on another device (another tab of this browser says so itself, sidebar.js): said once, here
    // where a read finds it, not only when a send is refused.
    goneSaid = true;
    toast("This chat no longer exists: it was deleted (on another device?). What it shows here is no longer kept.",
      "error", 10_000);
  }
  if (!res.ok || signedOut(res)) return null;
  const holder = document.createElement("div");
  holder.innerHTML = await res.text(); // server-rendered, sanitized fragment
  enhance(holder);
  return { nodes: [...holder.children], res };
}

/** The "Load earlier/newer messages" button of `action` reading on from id `from` (its wrapper put in
 *  by `place` when new), or none when `from` is null (the chat's first or last message is shown). */
function setLoad(action, text, from, place) {
  let btn = document.querySelector(`[data-action="${action}"]`);
  if (!from) { btn?.parentElement.remove(); return null; }
  if (!btn) {
    btn = el("button", "btn btn--ghost btn--sm", text);
    btn.type = "button";
    btn.dataset.action = action;
    const wrap = el("div", action);
    wrap.append(btn);
    place(wrap);
  }
  btn.dataset[action === "load-earlier" ? "before" : "after"] = String(from);
  return btn;
}

/** "Load earlier messages" reading on from id `before` (null: the first message is shown, no button). */
export function setEarlier(before) {
  setLoad("load-earlier", "Load earlier messages", before, (wrap) => messagesEl.before(wrap));
}

/** "Load newer messages" reading on after id `after` (null: the chat's end is shown, no button). */
export function setNewer(after) {
  const btn = setLoad("load-newer", "Load newer messages", after, (wrap) => {
    wrap.id = "load-newer";
    messagesEl.after(wrap);
  });
  if (btn && jumpBtn) jumpBtn.hidden = false; // the chat's end is not on the page: the jump button goes there
}

/** Where newer messages are read from (null: the chat's end is shown). */
export const newerAfter = () => document.querySelector('[data-action="load-newer"]')?.dataset.after || null;

/** Said once a page came in (`which`: "earlier" or "newer"): a screen reader heard nothing of the
 *  messages put above or below, nor that the chat's first message or its end was reached (`last`). */
export function sayLoaded(nodes, which, last) {
  const count = nodes.filter((node) => node.nodeType === Node.ELEMENT_NODE && node.matches(".msg")).length;
  const came = `${count} ${which} message${count === 1 ? "" : "s"} loaded`;
  announce(!last ? `${came}.` : `${came}: this is the ${which === "earlier" ? "start" : "end"} of the chat.`);
}

// Farther than this many screens, a jump lands at once: the timeline scrolls smoothly (app.css), and
// a link to a message 90 up, or a summary's "Show it", slid through the whole run to get there.
const FAR_SCREENS = 2;

/** `node` scrolled into the timeline's view (`block` as scrollIntoView's): smoothly when it is near,
 *  at once when it is far, or when the user asked for reduced motion (an explicit "smooth" overrides
 *  the stylesheet's reduce rule, so it is asked here). */
export function bringIntoView(node, block = "center") {
  const view = timeline.getBoundingClientRect();
  const seen = node.getBoundingClientRect();
  const far = Math.abs(seen.top + seen.height / 2 - (view.top + view.height / 2)) > FAR_SCREENS * view.height;
  const still = far || window.matchMedia("(prefers-reduced-motion: reduce)").matches;
  node.scrollIntoView({ block, behavior: still ? "instant" : "smooth" });
}

/** A message in view and its place on the screen: what a change above it must leave where it is. */
function anchorOf() {
  const top = timeline.getBoundingClientRect().top;
  const item = shown().find((m) => m.getBoundingClientRect().bottom > top);
  return item ? { item, top: item.getBoundingClientRect().top } : null;
}

function keepAnchor(anchor) {
  if (!anchor || !anchor.item.isConnected) return;
  const moved = anchor.item.getBoundingClientRect().top - anchor.top;
  // At once: the timeline scrolls smoothly (app.css), which would show the jump happen.
  if (moved) timeline.scrollBy({ top: moved, behavior: "instant" });
}

const redrawMarkers = () => placeWindowMarker(state.lastGauge ? state.lastGauge.window_start_id : app.dataset.windowStart,
  state.lastGauge && state.lastGauge.strategy);

/** After a page was put above: the newest messages beyond the bound go (they are pages below the view),
 *  and "Load newer messages" reads them back. Not while the page's own reply is written. */
export function trimNewest() {
  const items = shown();
  if (items.length <= MAX_RENDERED || state.streaming) return;
  const last = items[MAX_RENDERED - 1];
  const dropped = [];
  // Every node, not only the elements: the white space between messages read in would stay, one a message.
  for (let node = last.nextSibling; node; node = node.nextSibling) dropped.push(node);
  if (dropped.some((node) => node.nodeType === Node.ELEMENT_NODE && node.matches(KEEP))) return;
  dropped.forEach((node) => node.remove());
  setNewer(last.dataset.id);
}

/** After a page was put below: the oldest messages beyond the bound go (never the one read, `kept`),
 *  and "Load earlier messages" reads them back. */
function trimOldest(kept) {
  const items = shown();
  if (items.length <= MAX_RENDERED) return;
  const first = items[items.length - MAX_RENDERED];
  const dropped = [];
  for (let node = first.previousSibling; node; node = node.previousSibling) dropped.push(node);
  if (dropped.some((node) => node === kept || (node.nodeType === Node.ELEMENT_NODE && node.matches(KEEP)))) return;
  dropped.forEach((node) => node.remove());
  setEarlier(first.dataset.id);
}

/** One more page of the messages after those shown, at the bottom ("Load newer messages"). */
export async function loadNewer(btn) {
  if (btn.disabled) return false;
  // Disabled while it reads, the button drops the focus (to the page): it gets it back while it stays.
  const hadFocus = document.activeElement === btn;
  const focusLost = () => hadFocus && (!document.activeElement || document.activeElement === document.body);
  btn.disabled = true;
  const read = await fragment(`after=${btn.dataset.after}`);
  if (!read) {
    btn.disabled = false;
    if (focusLost()) btn.focus({ preventScroll: true });
    toast("Could not load newer messages.", "error");
    return false;
  }
  const fresh = read.nodes.filter((node) => !node.id || !document.getElementById(node.id));
  // The message read stays where it is on the screen, whatever the browser's own scroll anchoring made
  // of the page put in below it and of those taken off above.
  const anchor = anchorOf();
  messagesEl.append(...fresh);
  foldLong(fresh);
  const newest = read.res.headers.get("X-Newest-Id");
  const more = read.res.headers.get("X-Has-Newer") === "1" && newest;
  setNewer(more ? newest : null);
  putLiveBack();
  btn.disabled = false;
  trimOldest(anchor && anchor.item);
  redrawMarkers();
  keepAnchor(anchor);
  if (more && focusLost()) btn.focus({ preventScroll: true });
  // The button gone with the chat's end reached, the focus goes on to the first message it brought.
  if (hadFocus && !more && fresh[0]) {
    fresh[0].tabIndex = -1;
    fresh[0].focus({ preventScroll: true });
  }
  if (jumpBtn) jumpBtn.hidden = nearBottom();
  sayLoaded(fresh, "newer", !more);
  return true;
}

/** "Load earlier messages" as a page read before the oldest shown (`res`) says: none when it reached the first. */
export function earlierFrom(res) {
  const oldest = res.headers.get("X-Oldest-Id");
  setEarlier(res.headers.get("X-Has-Earlier") === "1" && oldest ? oldest : null);
}

// The page's own reply being written when a jump far up (a link, a search hit) replaced the run: taken
// off with it, its stream wrote on into a node no longer shown, and the way back brought the server's
// copy of it, stuck at "Writing…". Kept here, written on, and put back in place of that copy once the
// chat's end is shown again; meanwhile the jump button (the way back) says a reply is being written.
let live = null;

function showWriting(on) {
  if (!jumpBtn) return;
  const label = `Scroll to the newest message${on ? ": a reply is being written" : ""}`;
  jumpBtn.classList.toggle("is-writing", on);
  jumpBtn.setAttribute("aria-label", label);
  if (on) jumpBtn.title = label;
  else jumpBtn.removeAttribute("title");
}

function keepLive() {
  const own = messagesEl.querySelector(":scope > .msg.is-streaming");
  if (!own || !state.streaming) return;
  live = own;
  showWriting(true);
}

/** The chat's end shown again: the live reply in place of the server's copy (or last, none read yet). */
function putLiveBack() {
  if (!live || hasNewer()) return;
  const copy = live.id && document.getElementById(live.id);
  if (copy) copy.replaceWith(live);
  else messagesEl.append(live);
  live = null;
  showWriting(false);
}

// Ended off the page, the reply is stored as it ended: the copy the way back reads is the reply. (The
// event also says a reply followed from another tab ended: the page's own goes on while state.streaming.)
document.addEventListener("longchat:reply-ended", () => {
  if (live && !live.isConnected && !state.streaming) { live = null; showWriting(false); }
});

/** The run shown replaced by `above` and `below` (fragments read around a place in the path). */
function showRun(above, below) {
  const nodes = [...above.nodes, ...(below ? below.nodes : [])];
  keepLive();
  messagesEl.replaceChildren(...nodes);
  earlierFrom(above.res);
  const newest = below && below.res.headers.get("X-Newest-Id");
  setNewer(below && below.res.headers.get("X-Has-Newer") === "1" && newest ? newest : null);
  putLiveBack();
  foldLong(nodes);
  redrawMarkers();
}

/** The chat's newest page in place of the run shown, its end in view (a send, the jump button, a
 *  catch-up from far up). False when it could not be read: the page is left as it was. */
export async function toNewest() {
  if (!hasNewer()) return true;
  const read = await fragment("");
  if (!read) {
    toast("Could not load the newest messages: check the connection and try again.", "error");
    return false;
  }
  showRun(read, null);
  scrollToBottom(true);
  return true;
}

/** The page of the path that ends at message `id` and the page after it, in place of the run shown (a
 *  link to a message, a search hit). False when the message is not on the path (another version of
 *  the chat holds it), null when it could not be read (said): the run shown stays. */
export async function showAround(id) {
  const [above, below] = await Promise.all([fragment(`before=${id + 1}`), fragment(`after=${id}`)]);
  if (!above || !below) {
    toast("Could not load that message.", "error");
    return null;
  }
  if (!above.nodes.some((node) => node.id === `m-${id}`)) return false;
  showRun(above, below);
  return true;
}

document.addEventListener("click", (e) => {
  const target = e.target.closest('[data-action="load-newer"]');
  if (target) loadNewer(target);
});
