/* Long messages of yours, folded: a pasted log or file does not take over the timeline. A message of
 * yours taller than FOLD_ABOVE_LINES shows its first lines under a fade (how many: --fold-lines in
 * app.css), with a "Show more" / "Show less" button. Only the view is folded: Copy and Edit read the
 * message's source (.msg-source), never what shows. The model's replies are never folded.
 * The text beyond the fold is moved (not copied) into an element hidden until found: clipped alone, it
 * was found by the browser's find in page, which could not show it; hidden until found, find in page
 * reveals it (beforematch), and the message then shows whole.
 * Handles its own clicks (imported by main.js). */
import { el, icon } from "./dom.js";
import { messagesEl, timeline } from "./state.js";

// Folded when taller than 14 lines: as many as the editor shows before it scrolls (branches.js), about
// a third of a laptop's timeline and half a phone's, so a message up to there is read at a glance and
// one taller would push the reply it asked for out of view. Folded to 10 lines (--fold-lines), so a
// fold always hides a few lines: a "Show more" for a line or two would cost a click for nothing.
export const FOLD_ABOVE_LINES = 14;

let contentIds = 0;

/** The lines `article`'s text takes as shown unfolded; null when it is not laid out (hidden while it
 *  is edited, not in the page yet). */
function lines(article) {
  const content = article.querySelector(":scope > .msg-body > .msg-content--plain");
  if (!content || !content.getClientRects().length) return null;
  const style = getComputedStyle(content);
  const line = parseFloat(style.lineHeight) || parseFloat(style.fontSize) * 1.5;
  // scrollHeight is the whole text even while folded (overflow: clip only stops it being painted).
  return (content.scrollHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom)) / line;
}

function foldButton(content) {
  if (!content.id) { contentIds += 1; content.id = `msg-text-${contentIds}`; }
  const button = el("button", "btn btn--ghost btn--sm msg-fold");
  button.type = "button";
  button.dataset.action = "toggle-fold";
  button.setAttribute("aria-controls", content.id);
  button.append(el("span", "msg-fold-label"), icon("chevron"));
  return button;
}

const textOf = (article) => article.querySelector(":scope > .msg-body > .msg-content--plain");
const restOf = (content) => content.querySelector(":scope > .msg-fold-rest");

function show(article, folded) {
  article.classList.toggle("is-folded", folded);
  if (!folded) restOf(textOf(article))?.removeAttribute("hidden");
  const button = article.querySelector(".msg-fold");
  button.setAttribute("aria-expanded", String(!folded));
  button.querySelector(".msg-fold-label").textContent = folded ? "Show more" : "Show less";
}

/** The text beyond the fold back in line with the rest: where the fold falls moves with the width. */
function join(content) {
  const rest = restOf(content);
  if (!rest) return;
  rest.replaceWith(...rest.childNodes);
  content.normalize();
}

/** Where the fold of `content` (folded: clipped to its first lines) falls: the first character not
 *  wholly shown (a text node and an offset), and the height of the text from there on; null when
 *  nothing is hidden, or the text is not laid out. */
function foldPoint(content) {
  if (!content.getClientRects().length) return null;
  const shownEnd = content.getBoundingClientRect().top + content.clientTop + content.clientHeight
    - parseFloat(getComputedStyle(content).paddingBottom);
  const nodes = [];
  let total = 0;
  const walker = document.createTreeWalker(content, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    nodes.push([node, total]);
    total += node.length;
  }
  if (!nodes.length) return null;
  const at = (index) => {
    let i = nodes.length - 1;
    while (i > 0 && nodes[i][1] > index) i -= 1;
    return [nodes[i][0], index - nodes[i][1]];
  };
  // The text from its start up to a character reaches further down the more characters it holds,
  // whatever the box of a single one (a line break's) says: the first to reach past the shown lines.
  const range = document.createRange();
  range.selectNodeContents(content);
  const textEnd = range.getBoundingClientRect().bottom;
  range.setStart(nodes[0][0], 0);
  let low = 0;
  let high = total;
  while (low < high) {
    const mid = Math.floor((low + high) / 2);
    range.setEnd(...at(mid + 1));
    if (range.getBoundingClientRect().bottom > shownEnd + 0.5) high = mid;
    else low = mid + 1;
  }
  if (low >= total) return null;
  const [node, offset] = at(low);
  return { node, offset, height: textEnd - shownEnd };
}

/** Folds `articles` (already marked folded, so clipped): the text beyond each one's fold is moved into
 *  an element after it, hidden until found. That element keeps the height its text takes, so the box
 *  still measures the whole message (its scroll height), as when it was only clipped. All are measured
 *  before any is changed, so the page is laid out once. */
function hideRest(articles) {
  const contents = articles.map(textOf).filter((content) => content.getClientRects().length);
  contents.forEach(join);
  const points = contents.map((content) => [content, foldPoint(content)]).filter(([, point]) => point);
  for (const [content, { node, offset, height }] of points) {
    const range = document.createRange();
    range.setStart(node, offset);
    range.setEndAfter(content.lastChild);
    const rest = document.createElement("span");
    rest.className = "msg-fold-rest";
    rest.append(range.extractContents());
    rest.style.containIntrinsicBlockSize = `${height}px`;
    rest.setAttribute("hidden", "until-found");
    content.append(rest);
  }
}

function userMessages(nodes) {
  const found = [];
  for (const node of nodes) {
    if (!(node instanceof Element)) continue;
    if (node.matches(".msg--user")) found.push(node);
    else found.push(...node.querySelectorAll(".msg--user"));
  }
  return found;
}

/** Fold the long messages of yours among `nodes` (messages, or elements holding them), once they are
 *  in the page: the lines a message takes depend on the width it is shown at. All are measured before
 *  any is folded, so the page is laid out once. */
export function foldLong(nodes) {
  const fresh = userMessages(nodes).filter((article) => !article.querySelector(".msg-fold"));
  const long = fresh.filter((article) => lines(article) > FOLD_ABOVE_LINES);
  for (const article of long) {
    const content = article.querySelector(".msg-content--plain");
    content.after(foldButton(content));
    show(article, true);
  }
  hideRest(long);
}

/** Show the whole of `article` (a message a link or a search hit opens); false when it was not folded. */
export function unfold(article) {
  if (!article || !article.classList.contains("is-folded")) return false;
  show(article, false);
  return true;
}

const reducedMotion = window.matchMedia("(prefers-reduced-motion: reduce)");

function toggle(button) {
  const article = button.closest(".msg");
  const content = article.querySelector(".msg-content--plain");
  // A slide still running (pressed twice quickly) would hold the box open over the fold, and pile up.
  content.getAnimations().forEach((slide) => slide.cancel());
  if (article.classList.contains("is-folded")) {
    // It opens downwards: what is above stays where it is, and so does the button's focus.
    const from = content.clientHeight;
    show(article, false);
    if (!reducedMotion.matches) {
      const to = content.scrollHeight;
      content.animate([{ maxHeight: `${from}px`, overflow: "clip" }, { maxHeight: `${to}px`, overflow: "clip" }],
        { duration: Math.min(240, 120 + (to - from) / 20), easing: "ease-out" });
    }
    return;
  }
  // Folding a message read down to its end would leave the view far below it: the button stays where
  // it was on screen (the timeline scrolls with it), so the next message follows it as before.
  const before = button.getBoundingClientRect().top;
  show(article, true);
  hideRest([article]);
  const after = button.getBoundingClientRect().top;
  if (after < timeline.getBoundingClientRect().top) {
    timeline.style.scrollBehavior = "auto";
    timeline.scrollTop -= before - after;
    timeline.style.scrollBehavior = "";
  }
}

document.addEventListener("click", (e) => {
  const button = e.target.closest('[data-action="toggle-fold"]');
  if (button) toggle(button);
});

// Find in page has a match beyond the fold: the browser shows the hidden text, and the message is
// shown whole around it (no sliding open: the browser scrolls to the match at once).
document.addEventListener("beforematch", (e) => {
  const article = e.target.matches?.(".msg-fold-rest") && e.target.closest(".msg.is-folded");
  if (article) show(article, false);
});

// The lines a message takes change with the width: a narrowed window (a phone turned) folds the
// messages that have grown long, and one no longer long loses its button (unless it has the focus).
let width = messagesEl.clientWidth;

new ResizeObserver(() => {
  if (messagesEl.clientWidth === width) return;
  width = messagesEl.clientWidth;
  const foldable = [...messagesEl.querySelectorAll(".msg--user .msg-fold")]
    .filter((button) => button !== document.activeElement).map((button) => button.closest(".msg"));
  // Measured whole: the text hidden beyond the fold keeps the height it took at the old width.
  const folded = [...messagesEl.querySelectorAll(".msg--user.is-folded")];
  folded.map(textOf).filter((content) => content.getClientRects().length).forEach(join);
  const short = foldable.filter((article) => { const n = lines(article); return n !== null && n <= FOLD_ABOVE_LINES; });
  for (const article of short) {
    article.classList.remove("is-folded");
    article.querySelector(".msg-fold").remove();
    join(textOf(article));
  }
  hideRest(folded.filter((article) => !short.includes(article)));
  foldLong([messagesEl]);
}).observe(messagesEl);
