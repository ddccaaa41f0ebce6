/* The requests table (paginated API, newest first). */
import { api, getJSON, state } from "./state.js";
import { markSelected, selectTurn } from "./turn.js";
import { fmt, h, nf, percent, replyBadge, strategyBadge } from "./util.js";

export const PAGE = 15;

// Pages are counted from the newest turn: the oldest page holds what is left (1–5 of 20), so Older
// and Newer step through the same pages both ways, never showing a turn twice.
export async function loadRecords(offset, limit = PAGE) {
  const total = state.series.count;
  offset = Math.max(0, Math.min(offset, Math.max(0, total - 1)));
  state.recordsOffset = offset;
  const data = await getJSON(`${api}records/?limit=${Math.max(1, limit)}&offset=${offset}`);
  state.recordsShown = data.results.length;
  const body = document.querySelector("#records-table tbody");
  const rows = data.results.slice().reverse().map((r) => {
    const tr = h("tr", { "data-turn": r.turn, "data-record": r.id, tabindex: "0" },
      h("td", { text: nf.format(r.turn) }),
      h("td", { class: "l" }, strategyBadge(r.strategy, r.tokens_saved > 0),
        r.on_active_path ? null : h("span", { class: "badge badge--muted", text: "other branch",
          title: "This turn's reply is on another branch of the chat; its tokens and cost still count." }),
        replyBadge(r.reply_status)),
      h("td", { text: fmt(r.tokens_full) }),
      h("td", { text: fmt(r.tokens_sent) }),
      h("td", { text: percent(r.tokens_saved, r.tokens_full) }),
      h("td", { class: "hide-sm", text: r.provider_prompt_tokens === null ? "—" : fmt(r.provider_prompt_tokens) }),
      h("td", { class: "hide-sm", text: r.pack_ms.toFixed(1) + " ms" }));
    markSelected(tr, r.turn === state.turn);
    tr.addEventListener("click", () => selectTurn(r.turn));
    // Enter or Space, as on a button (Space scrolled the page a screen down instead).
    tr.addEventListener("keydown", (e) => {
      if (e.target !== tr || (e.key !== "Enter" && e.key !== " ")) return;
      e.preventDefault();
      selectTurn(r.turn);
    });
    return tr;
  });
  body.replaceChildren(...rows);
  const first = offset + 1, last = offset + data.results.length;
  document.querySelector("[data-page-label]").textContent = `${nf.format(first)}–${nf.format(last)} of ${nf.format(data.count)}`;
  const newer = document.querySelector("[data-page=newer]");
  const older = document.querySelector("[data-page=older]");
  const pressed = document.activeElement;
  newer.disabled = last >= data.count;
  older.disabled = offset <= 0;
  // The end reached disables the button pressed: the keyboard's focus goes to the other one, not the page.
  if ((pressed === newer || pressed === older) && pressed.disabled) (pressed === newer ? older : newer).focus();
}

export function setupRecords() {
  document.querySelector("[data-page=newer]").addEventListener("click",
    () => loadRecords(state.recordsOffset + state.recordsShown));
  document.querySelector("[data-page=older]").addEventListener("click", () => {
    const start = Math.max(0, state.recordsOffset - PAGE);
    return loadRecords(start, state.recordsOffset - start);
  });
  return loadRecords(Math.max(0, state.series.count - PAGE));
}
