/* The message box's "/" menu: typed at the start of an empty box, "/" and a command list the saved
 * prompts (Settings → Prompts, GET /api/prompts/) and the box's own /compact; ↑ ↓ choose, Enter or Tab
 * puts the choice in the box (a prompt's text with its variables filled in, prompt_vars.js: to finish
 * and send), Esc closes the menu and keeps the text. Self-contained: main.js only imports it. */
import { announce, el } from "./dom.js";
import { promptFilled } from "./prompt_vars.js";
import { api, composing, form, input } from "./state.js";

const menu = document.getElementById("slash-menu");
const OWN = [{ command: "compact", title: "Summarize this chat now (instructions may follow)", own: true }];
let prompts = [];
let loading = null;
let shown = [];
let active = 0;

/** Read at each opening of the menu, not kept for a while: a prompt edited or deleted in Settings in
 *  another tab is offered as it now reads. The browser asks with the list's ETag, so while nothing
 *  changed the answer is a 304 with no body and the texts are not sent again. */
function promptsLoad() {
  loading ??= api("/api/prompts/?limit=200").then((res) => {
    if (res.ok && res.data && Array.isArray(res.data.results)) prompts = res.data.results;
  }).finally(() => { loading = null; });
  return loading;
}

/** The command typed, when the box holds nothing else ("/" and word characters); null otherwise. */
function typed() {
  const match = input.value.match(/^\/([\w-]*)$/);
  return match ? match[1].toLowerCase() : null;
}

function matches(word) {
  const all = [...prompts, ...OWN];
  // The command typed whole first: "/compact" then Enter compacts, even beside a "/compact-brief".
  const first = all.filter((p) => p.command.startsWith(word)).sort((a, b) => (b.command === word) - (a.command === word));
  const then = word ? all.filter((p) => !p.command.startsWith(word) && p.title.toLowerCase().includes(word)) : [];
  return [...first, ...then]; // all of them, scrolled in the menu: "/" alone lists every prompt and /compact
}

function close() {
  if (menu.hidden) return;
  menu.hidden = true;
  menu.replaceChildren();
  input.removeAttribute("aria-activedescendant");
  shown = [];
}

/** An option's id, by its command (a-z, 0-9, "-", "_": a valid id; unique, /compact reserved): named by its
 *  place, typing on put another prompt where the chosen one was and aria-activedescendant kept its value,
 *  so a screen reader, told of no change, still read the option it had announced. */
function optionId(p) {
  return `slash-option-${p.command}`;
}

function draw() {
  menu.replaceChildren(...shown.map((p, i) => {
    const option = el("div", "slash-option");
    option.id = optionId(p); // by its command, not its place: see optionId
    option.dataset.index = String(i);
    option.setAttribute("role", "option");
    option.setAttribute("aria-selected", String(i === active));
    option.append(el("code", "slash-command", `/${p.command}`), el("span", "slash-title", p.title));
    return option;
  }));
  input.setAttribute("aria-activedescendant", optionId(shown[active]));
  fit();
  menu.querySelector('[aria-selected="true"]')?.scrollIntoView({ block: "nearest" });
}

/** The menu sits above the box and scrolls within the room there: on a phone held sideways, or with its
 *  keyboard up, its 280px ran off the top of the screen, the first options (the one chosen) with it. */
function fit() {
  const top = menu.parentElement.getBoundingClientRect().top + 4; // its bottom: calc(100% - 4px)
  const room = top - (window.visualViewport?.offsetTop ?? 0) - 8;
  menu.style.maxHeight = `${Math.max(48, Math.min(280, Math.floor(room)))}px`;
}

async function update() {
  if (typed() === null) { close(); return; }
  if (menu.hidden) await promptsLoad(); // opening; narrowing an open menu reads no more
  const word = typed(); // read again: the box may have changed, or been left, while the prompts loaded
  if (word === null || document.activeElement !== input) { close(); return; }
  const before = shown.length;
  const chosen = shown[active];
  shown = matches(word);
  if (!shown.length) { close(); return; }
  // Typed on, the option chosen stays chosen while listed, else the first is: kept by its place, the
  // place came to hold another prompt, which Enter put in the box.
  active = Math.max(0, shown.findIndex((p) => p.command === chosen?.command));
  const opening = menu.hidden;
  menu.hidden = false;
  draw();
  if (opening || before !== shown.length) {
    announce(`${shown.length} command${shown.length === 1 ? "" : "s"}: up and down to choose, Enter to use.`);
  }
}

async function pick(i) {
  const choice = shown[i];
  close();
  if (!choice) return;
  const typedThen = input.value;
  const { text, blank } = choice.own ? { text: `/${choice.command} `, blank: null }
    : await promptFilled(choice.content, { userName: document.getElementById("app")?.dataset.userName ?? "" });
  if (input.value !== typedThen) return; // typed on while the browser asked for the clipboard: theirs wins
  input.value = text;
  input.dispatchEvent(new Event("input", { bubbles: true })); // the box's size and the kept draft follow
  input.focus();
  if (blank) {
    // A {{…}} to fill in: selected, so what is typed replaces it (the browser scrolls to it).
    input.setSelectionRange(...blank);
    announce(`“/${choice.command}” is in the message box: type over the selected ${text.slice(...blank)}, then send.`);
    return;
  }
  input.setSelectionRange(text.length, text.length);
  // Setting the text does not scroll the box: a long prompt showed its first lines, the cursor after
  // its last (where the message is finished) out of view.
  input.scrollTop = input.scrollHeight;
  if (!choice.own) announce(`“/${choice.command}” is in the message box: finish it and send.`);
}

// On the whole menu, not its options only: a press beside them (its edge, a near miss) moved the focus
// to the menu, a scrolling box, and the box's blur closed it. The box keeps the focus.
menu.addEventListener("mousedown", (e) => {
  e.preventDefault();
  const option = e.target.closest('[role="option"]');
  if (option) pick(Number(option.dataset.index));
});
input.addEventListener("input", update);
input.addEventListener("blur", close);

// Capture, on the form: before the box's own Enter (send) and the page's Esc (stop a reply).
form.addEventListener("keydown", (e) => {
  if (menu.hidden || e.target !== input || composing(e)) return;
  const step = { ArrowDown: 1, ArrowUp: -1 }[e.key];
  if (step) {
    active = (active + step + shown.length) % shown.length;
    draw();
  } else if (e.key === "Enter" && !e.shiftKey && shown[active]?.own && shown[active].command === typed()) {
    close(); // "/compact" typed whole: Enter does what it did before the menu, it sends
    return;
  } else if ((e.key === "Enter" || e.key === "Tab") && !e.shiftKey) {
    pick(active); // Shift+Tab is left to leave the box (its blur closes the menu)
  } else if (e.key === "Escape") {
    close();
  } else {
    return;
  }
  e.preventDefault();
  e.stopPropagation();
}, true);
