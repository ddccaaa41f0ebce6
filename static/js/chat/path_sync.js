/* The page's messages brought in line with the chat's path, which another tab's Regenerate, Edit or
 * branch switch (or send) changed since the page drew it (history.js: catch up, a send left behind). */
import { keepEnd } from "./dom.js";
import { foldLong } from "./fold.js";
import { placeWindowMarker } from "./gauge.js";
import { app, messagesEl, state } from "./state.js";
import { earlierFrom, fragment } from "./window.js";

/** The messages of the path from id `since` on, as the page shows them; null when they could not be read. */
export async function messagesSince(since) {
  const read = await fragment(`since=${since}`);
  return read && read.nodes;
}

const shownBelow = (below) => [...messagesEl.querySelectorAll('[id^="m-"][data-id]')]
  .filter((m) => Number(m.dataset.id) < below);

/** The page's messages below id `below` replaced by the path's `newer` ones (read from `before` on,
 *  drawn as the path's end is: Regenerate on its last reply) under the newest page of those before
 *  them, "Load earlier messages" reading on from its oldest, as on a page opened now. Returns the nodes
 *  put in that the page did not show; null when the page could not be read. */
async function pageReplace(below, before, newer) {
  const read = await fragment(`before=${before}`);
  if (!read) return null;
  const nodes = [...read.nodes.filter((node) => node.id && node.dataset.id), ...newer];
  const missed = nodes.filter((node) => !document.getElementById(node.id));
  keepEnd(() => { // a page of another height: the end stays in view if it was
    shownBelow(below).forEach((m) => m.remove());
    messagesEl.prepend(...nodes);
    foldLong(missed);
  });
  earlierFrom(read.res);
  placeWindowMarker(state.lastGauge ? state.lastGauge.window_start_id : app.dataset.windowStart, state.lastGauge && state.lastGauge.strategy);
  return missed;
}

/** The page's messages from a few back (below id `below`), brought in line with the chat's path, in id
 * order: those another tab's Regenerate, Edit or branch switch took off it go (or the old reply stayed
 * above the new one), the missing come in their place (before `tail` when none follows). Returns the
 * nodes put in; null when the path could not be read, or when `stale()` says, once it is read, that
 * the page went on meanwhile (its own send began) and no longer wants it. */
export async function pathSync(below = Infinity, tail = null, stale = () => false) {
  const ids = shownBelow(below).map((m) => Number(m.dataset.id)).sort((a, b) => a - b);
  const since = ids.length ? ids[Math.max(0, ids.length - 20)] : 0;
  const nodes = await messagesSince(since);
  if (!nodes || stale()) return null;
  const onPath = nodes.filter((node) => node.id && node.dataset.id && Number(node.dataset.id) < below);
  if (since && !onPath.some((node) => Number(node.dataset.id) === since)) {
    // The message read from is off the path too: the branch was left above it (an edit or a switch far
    // up), and what the page shows before it may be as well. The path's newest page takes its place.
    return pageReplace(below, since, onPath);
  }
  const through = nodes.length >= 100 ? Math.max(...onPath.map((n) => Number(n.dataset.id))) : Infinity; // one page (views.TIMELINE_PAGE)
  const kept = new Set(onPath.map((node) => node.id));
  shownBelow(below).filter((m) => !kept.has(m.id) && Number(m.dataset.id) >= since && Number(m.dataset.id) <= through)
    .forEach((m) => m.remove());
  const missed = onPath.filter((node) => !document.getElementById(node.id));
  for (const node of missed) {
    const next = shownBelow(below).find((m) => Number(m.dataset.id) > Number(node.dataset.id));
    if (next) next.before(node); else if (tail) tail.before(node); else messagesEl.append(node);
  }
  foldLong(missed);
  return missed;
}
