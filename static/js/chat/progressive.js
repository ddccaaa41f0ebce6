/* A streaming reply drawn as Markdown (chatapp/chat/stream_markup.py): a `markup` event is the reply
 * so far, rendered and sanitized by the server; the deltas after it are added as text to its last
 * block (a paragraph, a list item, a code block's code) until the next one replaces it all. */

const tails = new WeakMap();

// The blocks added text goes on in: the last one's end, past its inline elements (a delta after
// "**bold**" is not bold), and inside a code block's code.
const BLOCKS = new Set(["P", "UL", "OL", "LI", "BLOCKQUOTE", "PRE", "TABLE", "THEAD", "TBODY", "TR", "TD", "TH",
  "DIV", "H1", "H2", "H3", "H4", "H5", "H6"]);

/** Show `html` (the server's rendering of the reply so far) in `contentEl`. */
export function markupShow(contentEl, html) {
  contentEl.classList.remove("is-plain");
  contentEl.innerHTML = html; // server-rendered and sanitized
  let host = contentEl;
  for (let child = host.lastElementChild; child; child = host.lastElementChild) {
    const tag = child.tagName.toUpperCase();
    if (!BLOCKS.has(tag) && !(tag === "CODE" && host.tagName === "PRE")) break;
    host = child;
  }
  tails.set(contentEl, host);
}

/** Add a delta's `text` where the reply's text goes on: after the last markup, else at the end. */
export function markupAppend(contentEl, text) {
  (tails.get(contentEl) || contentEl).append(document.createTextNode(text));
}
