/* Files into the message: the paperclip, a file dropped on the page, or one pasted into the box.
 * An image (PNG, JPEG, WebP, GIF) goes to the strip above the box, sent with the message (images.js);
 * any other file is read as text:
 *
 * A file's text goes into the box, fenced and named, where the cursor is: what the model is sent is
 * what the box shows, and it can be edited, kept as the draft, searched and recalled as any message.
 * Only UTF-8 text is taken (code, logs, Markdown, CSV, JSON…); anything else is refused by name, and
 * so is a file that would take the message past its character limit. The box is never changed by a
 * refusal. */
import { autosize, clearComposerError, showComposerError } from "./composer.js";
import { announce } from "./dom.js";
import { addImages, isImage } from "./images.js";
import { form, input, maxChars } from "./state.js";

const button = document.getElementById("attach-btn");
const picker = document.getElementById("attach-input");

// An extension that can name a code fence's language ("py", "c++", "objective-c"); others are left off.
const FENCE_LANGUAGE = /^[a-z0-9][a-z0-9+#-]{0,19}$/i;

/** The file's text, or a reason it is not taken. */
async function readText(file) {
  // A character is at most 4 bytes of UTF-8: a larger file cannot fit, and is not read at all.
  if (maxChars && file.size > maxChars * 4) {
    return { refused: `${file.name} is ${megabytes(file.size)}, more than a message can hold.` };
  }
  const bytes = new Uint8Array(await file.arrayBuffer());
  if (bytes.includes(0)) return { refused: `${file.name} is not a text file.` };
  try {
    return { text: new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes) };
  } catch {
    return { refused: `${file.name} is not UTF-8 text (save it as UTF-8 and attach it again).` };
  }
}

function megabytes(size) {
  return `${(size / 1048576).toLocaleString(undefined, { maximumFractionDigits: 1 })} MB`;
}

/** The file as the message holds it: its name on a line, then its text in a fence no line of it closes. */
export function fencedFile(name, text) {
  const longest = Math.max(0, ...[...text.matchAll(/`+/g)].map((m) => m[0].length));
  const fence = "`".repeat(Math.max(3, longest + 1));
  const dot = name.lastIndexOf(".");
  const extension = dot > 0 ? name.slice(dot + 1) : "";
  const language = FENCE_LANGUAGE.test(extension) ? extension.toLowerCase() : "";
  return `File: ${name}\n${fence}${language}\n${text.replace(/\n$/, "")}\n${fence}`;
}

/** Put `block` into the box at the cursor, a blank line either side of it; the cursor after it. */
function insertBlock(block) {
  // The box keeps its cursor while the focus is elsewhere: on the paperclip, whose file picker has just
  // closed (read only while the box had the focus, a chosen file went to the end of the message).
  const start = input.selectionStart;
  const end = input.selectionEnd;
  const before = input.value.slice(0, start).replace(/\s+$/, "");
  const after = input.value.slice(end).replace(/^\s+/, "");
  const head = before ? `${before}\n\n${block}` : block;
  input.value = after ? `${head}\n\n${after}` : `${head}\n\n`;
  input.focus();
  input.setSelectionRange(head.length + 2, head.length + 2);
  autosize();
  showCursor(head.length + 2);
}

/** Scroll the box to its cursor at `at`, which setting its text does not: after a long file the box
 *  showed its first lines, the cursor (where the question goes) out of view until a key was typed. */
function showCursor(at) {
  const text = input.value;
  input.value = text.slice(0, at); // the height of the text before the cursor
  const height = input.scrollHeight;
  input.value = text;
  input.setSelectionRange(at, at);
  input.scrollTop = Math.max(0, height - input.clientHeight);
}

/** Attach `files` in order; the first refusal is shown and stops the rest (those before it stay). */
export async function attachFiles(files) {
  clearComposerError();
  const refused = files.some(isImage) ? await addImages(files.filter(isImage)) : null;
  if (refused) showComposerError(refused);
  const names = [];
  for (const file of files.filter((f) => !isImage(f))) {
    const read = await readText(file);
    if (read.refused) {
      showComposerError(read.refused);
      break;
    }
    const block = fencedFile(file.name, read.text);
    const total = [...input.value].length + [...block].length + 4;
    if (maxChars && total > maxChars) {
      showComposerError(`${file.name} would make this message ${total.toLocaleString()} characters; `
        + `the limit is ${maxChars.toLocaleString()}.`);
      break;
    }
    insertBlock(block);
    names.push(`${file.name} (${[...read.text].length.toLocaleString()} characters)`);
  }
  if (names.length) announce(`Attached ${names.join(", ")} to your message.`);
}

if (button && picker) {
  button.addEventListener("click", () => picker.click());
  picker.addEventListener("change", async () => {
    const files = [...picker.files];
    picker.value = ""; // the same file can be chosen again
    await attachFiles(files);
  });
}

function carriesFiles(e) {
  return e.dataTransfer && [...e.dataTransfer.types].includes("Files");
}

// Anywhere on the page: a file dropped beside the box would otherwise be opened by the browser in
// the chat's place. The box is outlined while a file is over the page.
document.addEventListener("dragover", (e) => {
  if (!carriesFiles(e)) return;
  e.preventDefault();
  e.dataTransfer.dropEffect = "copy";
  form.classList.add("composer--drop");
});
document.addEventListener("dragleave", (e) => {
  if (!e.relatedTarget) form.classList.remove("composer--drop"); // left the window
});
document.addEventListener("drop", (e) => {
  form.classList.remove("composer--drop");
  if (!carriesFiles(e)) return;
  e.preventDefault();
  attachFiles([...e.dataTransfer.files]);
});

input.addEventListener("paste", (e) => {
  const files = e.clipboardData ? [...e.clipboardData.files] : [];
  // Text on the clipboard too (a copy from an editor or a spreadsheet): the text is what was meant.
  if (!files.length || e.clipboardData.types.includes("text/plain")) return;
  e.preventDefault();
  attachFiles(files);
});
