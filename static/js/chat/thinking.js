/* A reasoning model's thinking, streamed into a block above the reply's text: open while the model
 * thinks, folded once the answer starts. The server draws the same block for a stored reply
 * (_thinking.html). Model text, so only ever inserted as text. */
import { el, icon } from "./dom.js";

export function thinkingAdd(article, text) {
  let box = article.querySelector(".msg-thinking");
  if (!box) {
    box = el("details", "msg-thinking");
    box.open = true;
    const summary = el("summary");
    summary.append(icon("chevron"), el("span", "msg-thinking-label", "Thinking…"));
    const body = el("div", "msg-thinking-text");
    body.dir = "auto";
    box.append(summary, body);
    article.querySelector(".msg-content").before(box);
  }
  box.querySelector(".msg-thinking-text").append(document.createTextNode(text));
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
