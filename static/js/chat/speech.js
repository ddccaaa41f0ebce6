/* Read aloud: a message spoken by the browser's own speech synthesis (the Web Speech API), from the
 * message's ⋯ menu. One message at a time; the same item stops it.
 *
 * What is spoken is what the message says, not its markup: your text as you wrote it, a reply as it
 * reads on the page, with a code block said as "Code block." (read symbol by symbol it helps no one)
 * and a formula as the word "formula". A voice of the machine itself is preferred for the page's language:
 * some browsers also offer voices that send the text to their maker's servers, which a self-hosted
 * chat should not do unasked; with no local voice the browser's default speaks. Where the browser
 * has no speech synthesis the item is not shown (the `no-speech` class on <body>, chat-menu.css). */

import { toast } from "./state.js";

const synth = window.speechSynthesis;
export const speechSupported = Boolean(synth && window.SpeechSynthesisUtterance);
if (!speechSupported) document.body.classList.add("no-speech");

// Chromium is known to stop a long utterance after about fifteen seconds with some voices, and a sentence is the
// unit a listener follows: the text is queued in pieces of at most this many characters.
const PIECE_CHARS = 220;
const BLOCKS = "p, li, h1, h2, h3, h4, h5, h6, blockquote, tr, dt, dd, div, br, hr";

let reading = null; // the <article> being read

/** The words of `article`'s message, as they read. */
export function spokenText(article) {
  if (article.dataset.role === "user") return article.querySelector(".msg-source")?.value || "";
  const content = article.querySelector(".msg-content");
  if (!content) return "";
  const copy = content.cloneNode(true);
  copy.querySelectorAll("button, .code-head").forEach((node) => node.remove());
  copy.querySelectorAll(".code-block, pre").forEach((node) => node.replaceWith("\nCode block.\n"));
  copy.querySelectorAll(".math, math").forEach((node) => node.replaceWith(" formula "));
  // A task list's box is seen ticked or not: heard, its state goes before the item's words.
  copy.querySelectorAll("input[type=checkbox]").forEach((box) => box.replaceWith(box.checked ? "Done: " : "To do: "));
  copy.querySelectorAll("td, th").forEach((cell) => cell.append(", "));
  // Blocks end a sentence: without a break the last word of one would run into the first of the next.
  copy.querySelectorAll(BLOCKS).forEach((block) => block.append("\n"));
  return copy.textContent.split("\n").map((line) => line.replace(/\s+/g, " ").replace(/,\s*$/, "").trim())
    .filter(Boolean).join("\n");
}

/** `text` cut at line and sentence ends (else at spaces) into pieces of at most `limit` characters. */
export function speechPieces(text, limit = PIECE_CHARS) {
  const pieces = [];
  for (const line of text.split("\n")) {
    let piece = "";
    for (const sentence of line.match(/[^.!?。！？]+[.!?。！？]*\s*/g) || []) {
      for (const word of sentence.length > limit ? sentence.split(/(?<=\s)/) : [sentence]) {
        if (piece && (piece + word).length > limit) { pieces.push(piece.trim()); piece = ""; }
        piece += word;
      }
    }
    if (piece.trim()) pieces.push(piece.trim());
  }
  return pieces.flatMap((piece) => (piece.length > limit ? piece.match(new RegExp(`.{1,${limit}}`, "gu")) : [piece]));
}

function localVoice() {
  const lang = (document.documentElement.lang || navigator.language || "").toLowerCase().split("-")[0];
  const local = synth.getVoices().filter((voice) => voice.localService);
  return local.find((voice) => voice.default && voice.lang.toLowerCase().startsWith(lang))
    || local.find((voice) => voice.lang.toLowerCase().startsWith(lang)) || null;
}

function label(article, speaking) {
  const item = article.querySelector('[data-action="read-aloud"] span');
  if (item) item.textContent = speaking ? "Stop reading" : "Read aloud";
  article.classList.toggle("is-speaking", speaking);
}

export function stopReading() {
  if (!reading) return;
  const article = reading;
  reading = null;
  label(article, false);
  synth.cancel();
}

/** Read `article` aloud, or stop it when it is the one being read. */
export function readAloud(article) {
  if (!speechSupported) return;
  if (reading === article) { stopReading(); return; }
  stopReading();
  const pieces = speechPieces(spokenText(article));
  if (!pieces.length) return;
  reading = article;
  label(article, true);
  const voice = localVoice();
  // A browser with the API but no voice it can use (Chromium on Linux without speech-dispatcher) fails
  // every piece: said once. Our own stop (cancel) fails the pieces left as "interrupted" or "canceled".
  const failed = (e) => {
    if (reading !== article || e.error === "interrupted" || e.error === "canceled") return;
    stopReading();
    toast(`This browser could not read the message aloud (${e.error}): it may have no voice installed.`, "error", 6000);
  };
  pieces.forEach((piece, i) => {
    const utterance = new SpeechSynthesisUtterance(piece);
    if (voice) utterance.voice = voice;
    utterance.addEventListener("error", failed);
    if (i === pieces.length - 1) {
      // The last piece ended, or the engine gave up: the item says Read aloud again.
      const done = () => { if (reading === article) { reading = null; label(article, false); } };
      utterance.addEventListener("end", done);
      utterance.addEventListener("error", done);
    }
    synth.speak(utterance);
  });
}

// A page left (another chat opened, the tab closed) stops speaking: some browsers would go on.
if (speechSupported) window.addEventListener("pagehide", stopReading);
