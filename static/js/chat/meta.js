/* A message's meta row (who wrote it, its badges, its model and time) and its accessible name, for the
 * messages the page builds itself (a send, a regenerate, a retry, an edit), as templates/chat/_message.html
 * draws them: the article is named by a visually hidden h2, "You, Dec 4, 14:02" or "Assistant (model),
 * Dec 4, 14:02", so a screen reader moving by articles or headings hears whose turn it is. */
import { el, icon } from "./dom.js";

const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
let labels = 0;

const pad = (n) => String(n).padStart(2, "0");

function hidden(node) {
  node.setAttribute("aria-hidden", "true");
  return node;
}

/** "Dec 4, 14:02": the template's `M j, H:i` in the server's time zone (UTC, chatapp/settings.py), so a
 *  message reads the same before and after a reload. */
export function timeText(date) {
  return `${MONTHS[date.getUTCMonth()]} ${date.getUTCDate()}, ${pad(date.getUTCHours())}:${pad(date.getUTCMinutes())}`;
}

export function metaRow(role) {
  const meta = el("div", "msg-meta");
  // Author, model and time are the name's words again (nameMessage): read once, there.
  meta.append(hidden(el("span", "msg-author", role === "user" ? "You" : "Assistant")));
  const pin = el("span", "badge badge--pin");
  pin.hidden = true;
  pin.append(icon("pin"), document.createTextNode("Pinned · always sent"));
  meta.append(pin);
  meta.append(el("span", "badge badge--muted badge--outside", "Not sent verbatim"));
  meta.append(el("span", "badge badge--info badge--recalled", "Recalled for the latest message"));
  meta.append(hidden(el("time", "msg-time"))); // setWhen: now as it is built, then when the server stored it
  return meta;
}

/** Give a built article its name: a heading of its own that its aria-labelledby points at. */
export function nameMessage(article) {
  const label = el("h2", "visually-hidden msg-name");
  labels += 1;
  label.id = `msg-name-${labels}`;
  article.prepend(label);
  article.setAttribute("aria-labelledby", label.id);
  setWhen(article, new Date().toISOString());
}

// The name follows the meta row: it is written again whenever the model or the time changes.
function nameAgain(article) {
  const label = article.querySelector(":scope > .msg-name");
  if (!label) return;
  const meta = article.querySelector(".msg-meta");
  const model = meta.querySelector(".msg-model")?.textContent;
  const who = article.dataset.role === "user" ? "You" : `Assistant${model ? ` (${model})` : ""}`;
  label.textContent = `${who}, ${meta.querySelector(".msg-time").textContent}`;
}

/** The time the server stored the message at (an ISO date, the API's `created_at`). */
export function setWhen(article, iso) {
  const time = article.querySelector(".msg-time");
  const date = new Date(iso);
  if (!time || Number.isNaN(date.getTime())) return;
  time.dateTime = iso;
  time.textContent = timeText(date);
  nameAgain(article);
}

export function setModel(article, model) {
  if (!model) return;
  const meta = article.querySelector(".msg-meta");
  let m = meta.querySelector(".msg-model");
  if (!m) { m = hidden(el("span", "msg-model")); meta.insertBefore(m, meta.querySelector(".msg-time")); }
  m.textContent = model;
  nameAgain(article);
}
