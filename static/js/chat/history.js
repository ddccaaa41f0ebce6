/* Earlier messages on demand, links to a message (#m-<id>), and a reply streaming in another tab. */
import { announceReplyEnd, enhance, markLastReply, nearBottom, scrollToBottom, setStatus, showError } from "./dom.js";
import { foldLong, unfold } from "./fold.js";
import { followUnstarted } from "./lost_start.js";
import { placeWindowMarker, refreshGauge } from "./gauge.js";
import { messagesSince, pathSync } from "./path_sync.js";
import { api, app, busyHint, hint, input, messagesEl, sendBtn, signedOut, state, stopBtn, timeline, toast } from "./state.js";
import { searchWordsPattern } from "./search_marks.js";
import { thinkingReplace } from "./thinking.js";
import { titleCheck } from "./title_follow.js";
import { bringIntoView, hasNewer, sayLoaded, showAround, toNewest, trimNewest } from "./window.js";

/** One more page of earlier messages above those shown; the newest shown beyond the bound go (window.js). */
export async function loadEarlier(btn) {
  // Disabled while loading (and gone when nothing earlier is left), the button drops the focus:
  // it gets it back, or the newest of the messages just loaded takes it.
  const hadFocus = document.activeElement === btn;
  const focusLost = () => hadFocus && (!document.activeElement || document.activeElement === document.body);
  btn.disabled = true;
  const res = await fetch(`/c/${state.conversationId}/messages/?before=${btn.dataset.before}`, { credentials: "same-origin" });
  if (!res.ok || signedOut(res)) {
    btn.disabled = false;
    if (focusLost()) btn.focus();
    toast("Could not load earlier messages.", "error");
    return false;
  }
  const html = await res.text();
  const before = timeline.scrollHeight;
  const holder = document.createElement("div");
  holder.innerHTML = html; // server-rendered, sanitized fragment
  enhance(holder);
  const loaded = [...holder.querySelectorAll(":scope > .msg")];
  messagesEl.prepend(...holder.childNodes);
  foldLong(loaded); // before the view is put back where it was: their height is the folded one
  // At once: the timeline scrolls smoothly (app.css), and a smooth scroll would show the top of the page
  // just loaded, then run down through all of it back to the message that was being read.
  timeline.scrollBy({ top: timeline.scrollHeight - before, behavior: "instant" });
  trimNewest(); // below the view: nothing on the screen moves
  const more = res.headers.get("X-Has-Earlier") === "1" && res.headers.get("X-Oldest-Id");
  if (more) {
    btn.dataset.before = res.headers.get("X-Oldest-Id");
    btn.disabled = false;
    if (focusLost()) btn.focus({ preventScroll: true });
  } else {
    btn.parentElement.remove();
    const newest = loaded[loaded.length - 1];
    if (newest && focusLost()) {
      newest.tabIndex = -1;
      newest.focus();
    }
  }
  placeWindowMarker(state.lastGauge ? state.lastGauge.window_start_id : app.dataset.windowStart, state.lastGauge && state.lastGauge.strategy);
  sayLoaded(loaded, "earlier", !more);
  return true;
}

/** A send from a page left behind: another tab or device sent since, and the server chained this
 * message after turns the page never showed (the model got them). They are shown above it. */
export async function showMissedBefore(userEl, userMessage) {
  await pathSync(userMessage.id, userEl); // none read: offline for a moment, and the notice below says to reload
  if (!document.getElementById(`m-${userMessage.parent}`)) {
    toast("This chat changed in another tab: reload to see what your message follows.", "info", 8000);
  }
}

/** A send refused because a reply is being written (started in another tab or device, after this page
 *  drew the chat), or a Regenerate, Retry or Edit refused as no longer on the latest exchange: the page
 *  shows what it missed and follows a reply still written, so that the Stop and Esc the refusal speaks
 *  of reach it, and Enter waits for it. */
export async function catchUp() {
  if (!(await toNewest())) return; // read far up: what it missed is at the chat's end
  const missed = await pathSync();
  const reply = [...messagesEl.querySelectorAll(".msg--assistant[data-id]")].pop();
  if (missed && missed.length && reply) markLastReply(reply); // Regenerate and Continue only on the newest reply
  followElsewhere();
  // The path shown may be another (an edit or a switch elsewhere): the gauge counts what is sent now.
  if (missed && missed.length && !streamingElsewhere().length) refreshGauge();
}

/** A message opened from a search hit: the words the search matched in it, as the sidebar's snippet
 *  of it marks them (the server's analysis: stems, accents), are marked in the message too. Returns
 *  the first word it marked (none: no hit names the message yet, or its words are marked already). */
function markSearchWords(article) {
  const words = new Set([...document.querySelectorAll(`.conv-hit[href$="#m-${article.dataset.id}"] mark`)]
    .map((m) => m.textContent.trim()).filter(Boolean));
  const content = article.querySelector(".msg-content");
  if (!words.size || !content || content.querySelector("mark.search-mark")) return null;
  const pattern = searchWordsPattern(words);
  const walker = document.createTreeWalker(content, NodeFilter.SHOW_TEXT);
  const texts = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) texts.push(node);
  for (const node of texts) {
    const parts = node.data.split(pattern); // the words matched sit at the odd places
    if (parts.length < 2) continue;
    node.replaceWith(...parts.map((part, i) => (i % 2 ? Object.assign(document.createElement("mark"),
      { className: "search-mark", textContent: part }) : part)));
  }
  return content.querySelector("mark.search-mark");
}

/** The first word marked in a message, scrolled into view unless it is in view already. */
function showMark(mark) {
  const seen = mark.getBoundingClientRect();
  const view = timeline.getBoundingClientRect();
  if (seen.top < view.top || seen.bottom > view.bottom) bringIntoView(mark);
}

// The message the address named (#m-<id>), once shown. The address then forgets it, so that a later
// reload opens the chat at its end again, its long messages folded, as any other load.
let revealedId = null;

// A page opened from a search hit gets the sidebar's hits (their marked words) by a fetch of its own,
// which may end after the message was revealed: its words are marked then.
document.addEventListener("longchat:sidebar-updated", () => {
  const target = revealedId && document.getElementById(`m-${revealedId}`);
  const mark = target && markSearchWords(target);
  if (mark) { unfold(target); showMark(mark); }
});

export async function revealHash() {
  const match = window.location.hash.match(/^#m-(\d+)$/);
  if (!match) return;
  // However far up it is (a hit among the first of 20,000 messages): the page of the path around it
  // takes the place of the messages shown (window.js), read in two requests, not page by page.
  const shownNow = document.getElementById(`m-${match[1]}`) ? true : await showAround(Number(match[1]));
  const target = document.getElementById(`m-${match[1]}`);
  if (shownNow === false) {
    // Not on the path: an edit, a Regenerate or a switch (here or in another tab) took it off since the
    // link was made (a search hit, a bookmark). Said, not left to guess.
    toast("That message is on another version of this chat, not the one shown: ‹ › on a message above it show the other versions.", "info", 8000);
    window.history.replaceState(window.history.state, "", window.location.pathname + window.location.search);
  }
  if (target) {
    // Shown whole, not folded (fold.js): the words a search hit marks may be anywhere in it. Its first
    // marked word is brought into view; else the message, from its start when it is taller than the view.
    unfold(target);
    const mark = markSearchWords(target);
    if (mark) showMark(mark);
    else bringIntoView(target, target.offsetHeight > timeline.clientHeight ? "start" : "center");
    // The focus goes to it, as a link to a place in a page takes it there: a screen reader reads the
    // message, and Tab goes on to its controls rather than from the message box at the bottom.
    if (!target.hasAttribute("tabindex")) target.tabIndex = -1;
    target.focus({ preventScroll: true });
    target.classList.add("is-flash");
    target.animate([{ background: "var(--accent-soft)" }, { background: "transparent" }], { duration: 2000 });
    revealedId = match[1];
    window.history.replaceState(window.history.state, "", window.location.pathname + window.location.search);
  }
}

// A page opened while another tab (or device) streams a reply shows it as "Writing…": follow it
// from the server until it ends, then show it as stored. Bounded (FOLLOW_FOR_MS without progress), so a
// reply orphaned by a crashed server process is not polled forever.
export const FOLLOW_EVERY_MS = 2000;

export const FOLLOW_FOR_MS = 15 * 60 * 1000;

let followTimer = null;

let followSince = 0;

export function streamingElsewhere() {
  const mine = state.streaming && state.streaming.assistantId ? Number(state.streaming.assistantId) : null;
  return [...messagesEl.querySelectorAll('.msg[data-status="streaming"][data-id]')]
    .filter((m) => Number(m.dataset.id) !== mine && !m.classList.contains("is-streaming"));
}

/** The reply this page follows but did not start (another tab's, or one from before a reload): the
 *  composer's Stop and Esc stop it, and Enter, Edit and Regenerate wait for it, as for the page's own. */
export function followedReply() {
  return streamingElsewhere()[0] || null;
}

export async function stopFollowed(article = followedReply()) {
  if (!article || !article.dataset.id) return;
  const own = article.querySelector('[data-action="stop-reply"]');
  // Disabled once pressed, the reply's own Stop would drop the focus to the page: the composer's Stop
  // takes it (and hands it to the message box when the reply ends, as for the page's own reply).
  if (own && own === document.activeElement) (stopBtn.hidden ? input : stopBtn).focus();
  own?.setAttribute("disabled", "");
  await api(`/api/messages/${article.dataset.id}/stop/`, { method: "POST", body: {} });
  followElsewhere();
}

function showFollowed(on) {
  if (state.streaming) return; // the page's own reply: stream.setStreaming holds the composer
  const pressed = document.activeElement === (on ? sendBtn : stopBtn);
  sendBtn.hidden = on;
  stopBtn.hidden = !on;
  hint.hidden = on;
  busyHint.hidden = !on;
  input.setAttribute("aria-describedby", on ? busyHint.id : hint.id);
  if (pressed) (on ? stopBtn : input).focus();
  if (!on) document.dispatchEvent(new CustomEvent("longchat:reply-ended"));
}

/** The page's own reply lost its connection before its last event (a proxy, the network, the server
 *  restarting): what arrived stays as it came, and the reply is followed as one from another tab (the
 *  server may still be writing it, or be back soon), then shown as the server stored it: rendered, with
 *  its model and how it ended. Lost before it had an id, the reply is waited for (lost_start.js). */
export function followLost(article, userId) {
  if (!article.dataset.id) { followUnstarted(article, userId); return; }
  setStatus(article, "streaming");
  showError(article, "The connection to the server was lost. What arrived is kept; the reply is followed until the server says how it ended.", { retry: false });
  followElsewhere();
}

// What the tab that streams the reply shows when the chat is deleted (its `gone` event, chat_turn).
const GONE_WORDS = "This conversation was deleted while the reply was being written; nothing more is stored.";

/** Whether the chat is gone (deleted in another tab): its messages could not be read, and it answers 404. */
async function chatGone() {
  const res = await api(`/api/conversations/${state.conversationId}/`);
  return res.status === 404;
}

export function followElsewhere() {
  if (followTimer || !state.conversationId) return;
  const pending = streamingElsewhere();
  showFollowed(pending.length > 0);
  if (!pending.length) { followSince = 0; return; } // the next reply followed gets its own time
  if (!followSince) followSince = Date.now();
  if (Date.now() - followSince > FOLLOW_FOR_MS) return;
  followTimer = setTimeout(async () => {
    followTimer = null;
    const nodes = await messagesSince(Math.min(...pending.map((m) => Number(m.dataset.id))));
    if (!nodes && (await chatGone())) {
      // Nothing more will come: said as the streaming tab says it, and the composer is free again.
      for (const article of streamingElsewhere()) {
        setStatus(article, "error");
        showError(article, GONE_WORDS, { retry: false });
      }
      showFollowed(false);
      followSince = 0;
      return;
    }
    if (nodes) { // none: offline for a moment, tried again on the next round
      const stick = nearBottom();
      for (const node of nodes) {
        const existing = node.id ? document.getElementById(node.id) : null;
        // A reply that moved on (its checkpoints) is alive: the bound counts from its last progress, so a
        // slow model writing for longer than FOLLOW_FOR_MS is followed to its end.
        if (existing && existing.dataset.status === "streaming" && existing.textContent !== node.textContent) {
          followSince = Date.now();
        }
        if (existing && existing.parentElement === messagesEl) thinkingReplace(existing, node);
        else if (!existing && node.id && !hasNewer()) messagesEl.append(node); // else read with newer ones
      }
      // A followed reply the path no longer holds (a Retry in another tab took its silent stream over,
      // chat_retry): its row would read "Writing…" for good and hold the composer; its answer is shown.
      const returned = new Set(nodes.map((node) => node.id));
      const through = Math.max(0, ...nodes.map((node) => Number(node.dataset.id) || 0));
      for (const article of pending) {
        if (!returned.has(article.id) && (Number(article.dataset.id) <= through || !nodes.length)) article.remove();
      }
      foldLong(nodes);
      placeWindowMarker(state.lastGauge ? state.lastGauge.window_start_id : app.dataset.windowStart, state.lastGauge && state.lastGauge.strategy);
      // A screen reader hears a followed reply end as it hears the page's own (its last, if several).
      const ended = pending.map((m) => document.getElementById(m.id)).filter((m) => m && m.dataset.status !== "streaming");
      const last = ended[ended.length - 1];
      if (last) {
        announceReplyEnd(last.dataset.status, { cut: Boolean(last.querySelector(".msg-cut")),
          error: last.querySelector(".msg-error-text")?.textContent.trim() || "" });
      }
      if (!streamingElsewhere().length) {
        refreshGauge();
        titleCheck(state.conversationId);
      }
      if (stick) scrollToBottom(true);
    }
    followElsewhere();
  }, FOLLOW_EVERY_MS);
}
