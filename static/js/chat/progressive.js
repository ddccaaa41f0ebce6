/* A streaming reply drawn as Markdown (chatapp/chat/stream_markup.py): a `markup` event is the reply
 * so far, rendered and sanitized by the server; the deltas after it are added as text to its last
 * block (a paragraph, a list item, a code block's code) until the next one replaces it all. */

const tails = new WeakMap();

// The blocks added text goes on in: the last one's end, past its inline elements (a delta after
// "**bold**" is not bold), and inside a code block's code.
const BLOCKS = new Set(["P", "UL", "OL", "LI", "BLOCKQUOTE", "PRE", "TABLE", "THEAD", "TBODY", "TR", "TD", "TH",
  "DIV", "H1", "H2", "H3", "H4", "H5", "H6"]);

/** Show `html` (the server's rendering of `text`, the reply so far) in `contentEl`. */
export function markupShow(contentEl, html, text = "") {
  contentEl.classList.remove("is-plain");
  contentEl.innerHTML = html; // server-rendered and sanitized
  let host = contentEl;
  for (let child = host.lastElementChild; child; child = host.lastElementChild) {
    const tag = child.tagName.toUpperCase();
    if (!BLOCKS.has(tag) && !(tag === "CODE" && host.tagName === "PRE")) break;
    host = child;
  }
  tails.set(contentEl, host);
  endLikeText(host, text);
}

/* The rendering ends its last block otherwise than the text does: a paragraph's last space is trimmed
 * (the next word, "world " after "Hello ", ran into it: "Helloworld") and a code block gains a line
 * break its unfinished line does not have (the rest of the line went on below it). The block is given
 * the text's own ending, so the deltas after it go on where the text does. */
function endLikeText(host, text) {
  const walker = document.createTreeWalker(host, NodeFilter.SHOW_TEXT);
  const nodes = [];
  while (walker.nextNode()) nodes.push(walker.currentNode);
  for (let node = nodes.pop(); node; node = nodes.pop()) {
    node.data = node.data.replace(/\s+$/, "");
    if (node.data) break;
    node.remove();
  }
  // Nothing drawn yet in the block (a code fence just opened): the fence line's own break is not code.
  if (host.textContent) host.append(document.createTextNode(text.match(/\s*$/)[0]));
}

/** Add a delta's `text` where the reply's text goes on: after the last markup, else at the end. */
export function markupAppend(contentEl, text) {
  (tails.get(contentEl) || contentEl).append(document.createTextNode(text));
}
