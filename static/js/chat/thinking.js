/* A reasoning model's thinking, streamed into a block above the reply's text: open while the model
 * thinks, folded once the answer starts. The server draws the same block for a stored reply
 * (_thinking.html). Model text, so only ever inserted as text. */
import { el, icon } from "./dom.js";

// A box scrolled this close to its end is following the thinking as it grows.
const AT_END_PX = 24;

const atEnd = (body) => body.scrollHeight - body.scrollTop - body.clientHeight < AT_END_PX;

export function thinkingAdd(article, text) {
  let box = article.querySelector(".msg-thinking");
  if (!box) {
    box = el("details", "msg-thinking");
    box.open = true;
    const summary = el("summary");
    const chevron = icon("chevron");
    chevron.classList.add("chevron"); // what turns it with the block (app.css), as _thinking.html has it
    summary.append(chevron, el("span", "msg-thinking-label", "Thinking…"));
    const body = el("div", "msg-thinking-text");
    body.dir = "auto";
    box.append(summary, body);
    article.querySelector(".msg-content").before(box);
  }
  const body = box.querySelector(".msg-thinking-text");
  // Past the box's max-height the newest thinking would grow out of sight: it stays in view, unless
  // the reader scrolled up in the box to read.
  const follow = atEnd(body);
  body.append(document.createTextNode(text));
  if (follow) body.scrollTop = body.scrollHeight;
}

/** A stored reply's thinking that the stream did not show as such (a block the chat template opened
 * in the prompt is told apart only once the reply is whole). */
export function thinkingShown(article, reasoning) {
  if (reasoning && !article.querySelector(".msg-thinking")) thinkingAdd(article, reasoning);
}

/** The answer has started, or the reply has ended: the thinking folds away, still a click from view. */
export function thinkingEnd(article) {
  const box = article.querySelector(".msg-thinking");
  if (!box || box.classList.contains("is-done")) return;
  box.classList.add("is-done");
  box.open = false;
  box.querySelector(".msg-thinking-label").textContent = "Thinking";
}

/** A followed reply (history.js) redrawn from the server every few seconds: its thinking block stays
 * as the reader left it, opened or folded (until the answer starts and it folds, as a streamed one
 * does), scrolled, and focused, rather than snapping back at each round. */
export function thinkingReplace(existing, node) {
  const was = existing.querySelector(".msg-thinking");
  const now = node.querySelector(".msg-thinking");
  const wasBody = was && was.querySelector(".msg-thinking-text");
  const seen = wasBody && { top: wasBody.scrollTop, end: atEnd(wasBody) };
  const focused = Boolean(was) && was.querySelector("summary") === document.activeElement;
  existing.replaceWith(node);
  if (!was || !now) return;
  if (was.classList.contains("is-done") === now.classList.contains("is-done")) now.open = was.open;
  const body = now.querySelector(".msg-thinking-text");
  body.scrollTop = seen.end ? body.scrollHeight : seen.top;
  if (focused) now.querySelector("summary").focus({ preventScroll: true });
}
