/* The chat page: wires the modules together (clicks, keys) and starts. Plain ES modules, no build step. */
import { autosize, sendMessage } from "./composer.js";
import { announce, enhance, moveFocusOff, nearBottom, scrollToBottom } from "./dom.js";
import { draftRestore } from "./draft.js";
import { foldLong } from "./fold.js"; // also handles its own clicks (Show more / Show less)
import { placeWindowMarker, refreshGauge } from "./gauge.js";
import { followElsewhere, loadEarlier, revealHash, stopFollowed } from "./history.js";
import { followComing } from "./lost_start.js";
import { compactNow, dismissAwaiting, dismissedJobs, refreshJobs } from "./jobs.js";
import { editSystemPrompt, pointExportLinks } from "./prompt.js";
import { deleteConversation, inlineRename, pinConversation, renameConversation } from "./sidebar.js";
import { app, composing, copyText, gaugeBtn, gaugePop, input, jobBanner, jumpBtn, messagesEl, state, timeline, titleEl, toast } from "./state.js";
import "./attach.js"; // text files into the message box: the paperclip, a drop, a paste
import { branchFocusRestore, forkChat } from "./branches.js"; // Edit and ‹ n/m › (versions of a message): handles its own clicks
import "./folders.js"; // New folder, a folder's fold and menu: handles its own clicks
import "./folder_move.js"; // "Move to folder…" in the header menu: handles its own clicks
import "./archive.js"; // Archive / Unarchive (sidebar row, header menu, the archived note): handles its own clicks
import "./tab_sync.js"; // what another tab or device said in this chat, shown here too
import "./share.js"; // "Share…" in the header menu: handles its own clicks
import "./slash.js"; // the message box's "/" menu: saved prompts and /compact
import { openShortcuts } from "./shortcuts.js"; // also handles its own keys
import { readAloud } from "./speech.js"; // Read aloud: the browser's speech synthesis
import { titleFollow } from "./title_follow.js";
import { toNewest } from "./window.js"; // also handles its own clicks (Load newer messages)
import { busyNow, regenerate, retry, stop } from "./stream.js";
import { discardSummary, editSummary, revealSummary, togglePin } from "./summaries.js";

// What Continue sends after a reply cut at the output limit: the cut reply is in the context as far as
// it went (as after Stop), so a plain request for the rest works with every model and server.
const CONTINUE_WORDS = "Continue exactly where your last reply stopped.";

timeline.addEventListener("scroll", () => { jumpBtn.hidden = nearBottom(); }, { passive: true });

function closeMenus(except) {
  // An item chosen (Pin, Export, Compact now…) is hidden with its menu: focus goes back to the
  // menu's button rather than falling to the page.
  document.querySelectorAll(".menu:not([hidden])").forEach((menu) => {
    if (menu === except) return;
    const hadFocus = menu.contains(document.activeElement);
    menu.hidden = true;
    menu.previousElementSibling?.setAttribute("aria-expanded", "false");
    if (hadFocus) menu.previousElementSibling?.focus();
  });
  if (gaugePop && gaugePop !== except && !gaugePop.hidden) {
    const hadFocus = gaugePop.contains(document.activeElement);
    gaugePop.hidden = true;
    gaugeBtn.setAttribute("aria-expanded", "false");
    if (hadFocus) gaugeBtn.focus();
  }
}

// Tab (or Shift+Tab) out of an open menu or the gauge's popover closes it, as a menu's role promises:
// left open, it covered the controls the focus went on to. Focus on a menu's own button keeps it.
document.addEventListener("focusin", (e) => {
  const at = e.target;
  if (!(at instanceof Element)) return;
  const own = at.closest(".menu, .gauge-pop") || (at === gaugeBtn ? gaugePop : null)
    || (at.nextElementSibling?.matches(".menu") ? at.nextElementSibling : null);
  closeMenus(own);
});

// The chats drawer (phones).
function setSidebar(open) {
  app.classList.toggle("sidebar-open", open);
  // On a phone the drawer covers the chat: Tab stays in it, as in any modal drawer.
  document.getElementById("main").inert = open && window.matchMedia("(max-width: 760px)").matches;
  document.querySelector(".sidebar-toggle").setAttribute("aria-expanded", String(open));
  document.querySelector(".scrim").hidden = !open;
}

// Back to a chat from the page a drawer link opened: the browser restores the page as it was left,
// drawer open over the chat; the chat is what was asked for.
window.addEventListener("pageshow", (e) => { if (e.persisted) setSidebar(false); });

// Wider than a phone (a tablet turned, a window widened) there is no drawer: nothing stays inert.
window.matchMedia("(max-width: 760px)").addEventListener("change", (e) => { if (!e.matches) setSidebar(false); });

document.addEventListener("click", async (e) => {
  const target = e.target.closest("[data-action]");
  if (!target) {
    if (!e.target.closest(".menu, .gauge-pop")) closeMenus();
    return;
  }
  const action = target.dataset.action;
  const article = target.closest(".msg");
  switch (action) {
    case "toggle-sidebar":
    case "close-sidebar": {
      const open = action === "toggle-sidebar" && !app.classList.contains("sidebar-open");
      setSidebar(open);
      if (open) document.getElementById("new-chat").focus();
      else if (window.matchMedia("(max-width: 760px)").matches) document.querySelector(".sidebar-toggle").focus();
      break;
    }
    case "shortcuts":
      openShortcuts();
      break;
    case "copy-code": {
      const pre = target.closest(".code-block").querySelector("pre");
      const ok = await copyText(pre.innerText.replace(/\n$/, ""));
      const label = target.querySelector("span");
      label.textContent = ok ? "Copied" : "Copy failed";
      // Heard too: a screen reader reads the button by its fixed label ("Copy code"), not this text.
      announce(ok ? "Code copied to the clipboard." : "Could not copy the code.");
      setTimeout(() => { label.textContent = "Copy"; }, 1500);
      break;
    }
    case "copy-message": {
      const ok = await copyText(article.querySelector(".msg-source").value);
      toast(ok ? "Copied to the clipboard." : "Could not copy.", ok ? "info" : "error", 1800);
      break;
    }
    case "conv-menu":
    case "folder-menu": // a folder's ⋯ in the sidebar (its items: folders.js)
    case "message-menu": {
      if (action === "conv-menu") pointExportLinks();
      const menu = target.nextElementSibling;
      const open = menu.hidden;
      closeMenus(menu);
      menu.hidden = !open;
      target.setAttribute("aria-expanded", String(open));
      if (open) {
        menu.querySelector("[role='menuitem']")?.focus({ preventScroll: true });
        // Under the last reply the menu reached past the timeline's bottom edge, its end hidden
        // under the composer: the timeline scrolls just enough to show it whole.
        menu.scrollIntoView({ block: "nearest" });
      }
      break;
    }
    case "edit-system-prompt":
      closeMenus();
      await editSystemPrompt();
      break;
    case "export-conversation":
      closeMenus(); // the link's own download goes on
      break;
    case "toggle-pin":
      closeMenus();
      if (article && article.dataset.id) await togglePin(article);
      break;
    case "fork-chat":
      closeMenus();
      if (article && article.dataset.id) await forkChat(article);
      break;
    case "read-aloud":
      closeMenus();
      if (article) readAloud(article);
      break;
    case "regenerate":
      if (article && article.dataset.id) await regenerate(article);
      break;
    case "retry":
      if (article) await retry(article);
      break;
    case "continue": // a reply cut at the output limit: the model is asked for the rest, the draft kept
      // As the answer to that reply: refused (409) if another tab went on from it meanwhile.
      if (!busyNow()) await sendMessage(CONTINUE_WORDS, { keepDraft: true, parent: article && article.dataset.id });
      break;
    case "stop": // the composer's Stop: this page's reply, or the one it follows (history.js)
      await (state.streaming ? stop() : stopFollowed());
      break;
    case "stop-reply": // a reply written on the server for a page that left it (history.js follows it)
      if (article) await stopFollowed(article);
      break;
    case "toggle-gauge": {
      const open = gaugePop.hidden;
      closeMenus(gaugePop);
      gaugePop.hidden = !open;
      gaugeBtn.setAttribute("aria-expanded", String(open));
      break;
    }
    case "compact":
      closeMenus();
      moveFocusOff(jobBanner); // its question is replaced by the job's progress
      await compactNow("");
      break;
    case "dismiss-job":
      if (state.currentJob) dismissedJobs.add(state.currentJob.id);
      moveFocusOff(jobBanner);
      jobBanner.hidden = true;
      state.watchedJobId = null;
      break;
    case "not-now":
      moveFocusOff(jobBanner); // first: a focused button that is disabled drops the focus to the page
      target.disabled = true;
      await dismissAwaiting();
      break;
    case "show-summary":
      if (state.currentJob && state.currentJob.summary_id && !revealSummary(state.currentJob.summary_id)) {
        window.location.href = `/c/${state.conversationId}/#m-${state.currentJob.summary_id}`;
      }
      break;
    case "jump-bottom": // read far up, the chat's newest page comes back first (window.js)
      moveFocusOff(jumpBtn); // pressed from the keyboard, it hides: the message box takes the focus
      if (!(await toNewest())) break;
      scrollToBottom(true);
      jumpBtn.hidden = true;
      break;
    case "reload":
      window.location.reload();
      break;
    case "rename-current": {
      const h1 = document.getElementById("chat-title");
      inlineRename(h1, h1.textContent, (title) => renameConversation(state.conversationId, title));
      break;
    }
    case "rename-conversation": {
      const item = target.closest(".conv-item");
      const titleEl = item.querySelector(".conv-link");
      inlineRename(titleEl, titleEl.textContent.trim(), (title) => renameConversation(item.dataset.id, title));
      break;
    }
    case "pin-conversation":
      await pinConversation(target.closest(".conv-item").dataset.id, target.dataset.pinned !== "1");
      break;
    case "delete-conversation": {
      const item = target.closest(".conv-item");
      await deleteConversation(item.dataset.id, item.querySelector(".conv-title").textContent.trim());
      break;
    }
    case "load-earlier":
      await loadEarlier(target);
      break;
    case "edit-summary":
      await editSummary(target.closest(".summary-marker"));
      break;
    case "discard-summary":
      await discardSummary(target.closest(".summary-marker"));
      break;
    default:
      break;
  }
});

titleEl.addEventListener("dblclick", () => {
  if (state.conversationId) document.querySelector('[data-action="rename-current"]')?.click();
});

document.addEventListener("keydown", (e) => {
  if (composing(e)) return; // an input method's Esc drops its composition: it stops no reply
  if (e.key === "Escape" && !e.shiftKey) { // Shift+Esc focuses the composer (shortcuts.js)
    // Escape stops a state.streaming reply unless it is closing a menu or dialog first.
    const menuOpen = document.querySelector(".menu:not([hidden])") || (gaugePop && !gaugePop.hidden)
      || document.querySelector("dialog[open]") || document.querySelector(".conv-rename, .title-input");
    // Esc in another field (the chats search clears itself) or closing the drawer is not a Stop.
    const field = document.activeElement?.closest("input, textarea, select");
    // A search box with text clears itself (the browser's own Esc): that press does only that, the
    // drawer it is in stays open for the next look (the same press closed it, on phones).
    if (field?.type === "search" && field.value) return;
    const elsewhere = menuOpen || app.classList.contains("sidebar-open") || (field && field.id !== "composer-input");
    if (!elsewhere) state.streaming ? stop() : stopFollowed();
    // A menu closed from inside gives focus back to its button, not to the page.
    const inMenu = document.activeElement?.closest(".menu:not([hidden])");
    closeMenus();
    if (inMenu) { inMenu.previousElementSibling?.focus(); return; }
    if (app.classList.contains("sidebar-open")) document.querySelector('[data-action="close-sidebar"]').click();
    return;
  }
  // ↑ ↓ Home End move between a menu's items, as a menu's role promises.
  const menu = document.activeElement?.closest(".menu:not([hidden])");
  if (!menu || !["ArrowDown", "ArrowUp", "Home", "End"].includes(e.key)) return;
  const items = [...menu.querySelectorAll("[role='menuitem']")].filter((i) => !i.hidden && !i.disabled);
  if (!items.length) return;
  e.preventDefault();
  const at = items.indexOf(document.activeElement);
  const next = { ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: items.length - 1 }[e.key];
  items[(next + items.length) % items.length].focus();
});

enhance(messagesEl);

foldLong([messagesEl]); // before the timeline is scrolled to its end: that end is where folding leaves it

const lastReply = messagesEl.querySelector(".msg:has([data-action='regenerate'])");

if (lastReply) lastReply.classList.add("is-last");

placeWindowMarker(app.dataset.windowStart, null);

scrollToBottom(true);

draftRestore();
autosize();

// The composer has the focus on load, except on a touch screen (where it would open the keyboard), or
// when the address names a message (revealHash, below).
if (!window.matchMedia("(pointer: coarse)").matches) input.focus();

if (state.conversationId) {
  refreshGauge().then(() => refreshJobs());
  followElsewhere();
  if (app.dataset.replyComing === "1") followComing(); // reloaded just after a send: its reply comes all the same
  // Opened just after another tab's first reply ended: the model is naming the chat.
  if (app.dataset.titlePending === "1") titleFollow(state.conversationId, titleEl.textContent);
  revealHash().then(branchFocusRestore); // after the message box, then the message named, took the focus
  window.addEventListener("hashchange", revealHash);
}

