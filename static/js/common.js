/* Shared helpers for every page: CSRF-aware fetch, toasts, a confirm dialog. No framework. */
"use strict";

const Longchat = (() => {
  function csrfToken() {
    // The cookie first: signing in, in another tab too, renews it, and a page drawn before kept the old
    // token in its meta tag (its calls were refused until a reload). The tag when no cookie is readable.
    const match = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    if (match) return decodeURIComponent(match[1]);
    const meta = document.querySelector('meta[name="csrf-token"]');
    return meta ? meta.content : "";
  }

  /** Plain-words message from a DRF-style error body. */
  function errorText(data, status) {
    // DRF's words ("Authentication credentials were not provided.") to a page whose user signed out
    // since it was drawn, in another tab or by the session's end: what happened, and the way back.
    if (status === 401) return "You are signed out (in another tab, or your session ended): reload the page to sign in again.";
    if (!data || typeof data !== "object") return `The server answered with an error (${status}).`;
    // Django's words for a row not found ("No Conversation matches the given query."): on these pages,
    // one deleted since the page was drawn (in another tab or device), said so plainly.
    const gone = status === 404 && typeof data.detail === "string" && /^No (\w+) matches the given query\.$/.exec(data.detail);
    const named = { Conversation: "chat", LLMConfig: "model" };
    if (gone) return `This ${named[gone[1]] || gone[1].toLowerCase()} no longer exists: it was deleted (in another tab or device?).`;
    if (typeof data.detail === "string") return data.detail;
    if (typeof data.error === "string") return data.error;
    if (typeof data.message === "string") return data.message;
    const parts = [];
    for (const [field, value] of Object.entries(data)) {
      const text = Array.isArray(value) ? value.join(" ") : typeof value === "string" ? value : "";
      if (text) parts.push(field === "non_field_errors" ? text : `${field}: ${text}`);
    }
    return parts.length ? parts.join(" ") : `The server answered with an error (${status}).`;
  }

  // The browser's other tabs of this site hear of a change to the chats list made in this one (a rename,
  // a pin, an archive, a folder, a deletion, a new chat, a reply that moved a chat up), so that their
  // sidebars are drawn again at once (chat/sidebar.js) instead of at their next redraw or reload.
  const tabs = "BroadcastChannel" in window ? new BroadcastChannel("longchat-chats") : null;
  const LISTED = /^\/api\/(conversations|folders)(\/|$)/;

  function tellTabs(change) {
    try { tabs?.postMessage(change); } catch { /* a page being closed */ }
  }

  function hearTabs(handler) {
    tabs?.addEventListener("message", (e) => handler(e.data || {}));
  }

  /** fetch() with the CSRF header and JSON in/out. Resolves to {ok, status, data}; never throws on HTTP errors. */
  async function api(url, { method = "GET", body, signal } = {}) {
    const headers = { Accept: "application/json" };
    if (method !== "GET") headers["X-CSRFToken"] = csrfToken();
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let response;
    try {
      response = await fetch(url, {
        method, headers, signal, credentials: "same-origin",
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err) {
      if (err && err.name === "AbortError") throw err;
      return { ok: false, status: 0, data: { detail: "Could not reach the server. Check your connection and try again." } };
    }
    if (response.ok && method !== "GET") {
      const path = new URL(url, window.location.href).pathname;
      if (LISTED.test(path)) tellTabs({ method, path });
    }
    let data = null;
    if (response.status !== 204) {
      const type = response.headers.get("Content-Type") || "";
      data = type.includes("json") ? await response.json().catch(() => null) : null;
    }
    return { ok: response.ok, status: response.status, data };
  }

  /** GET a JSON resource; rejects with the server's error in plain words. */
  async function getJSON(url, { signal } = {}) {
    const res = await api(url, { signal });
    if (!res.ok) throw new Error(errorText(res.data, res.status));
    return res.data;
  }

  /** Whether a page fragment's fetch was answered with the sign-in page (fetch follows the redirect of a
   *  session that ended: signed out, or the account deleted, in another tab): said, and not to be drawn. */
  function signedOut(response) {
    if (!response.redirected) return false;
    toast("You are signed out (in another tab?): reload the page to sign in again.", "error", 10_000);
    return true;
  }

  function toast(text, kind = "info", ms = 3500) {
    const box = document.getElementById("toasts");
    if (!box) return;
    // The same words again replace the ones shown (a repeated refusal must not stack up the screen).
    for (const shown of [...box.children]) if (shown.textContent === text) shown.remove();
    const el = document.createElement("div");
    el.className = `toast toast--${kind}`;
    el.textContent = text;
    box.append(el);
    setTimeout(() => el.remove(), ms);
  }

  // The answer of the last opening whose close event has not come yet (see confirmAction).
  let pendingAnswer = null;

  /** Resolves true when the user confirms in the page's <dialog id="confirm-dialog">. */
  function confirmAction(text, okLabel = "Delete") {
    const dialog = document.getElementById("confirm-dialog");
    if (!dialog || typeof dialog.showModal !== "function") return Promise.resolve(window.confirm(text));
    // The close event is queued, not fired as the dialog closes, and the browser may run a key press
    // first: Cancel then Delete again at once reopens the dialog before the first close event, which
    // would answer the new opening (with its cleared returnValue) and leave its OK unheard. The last
    // opening is answered here, with the button it closed on, before the dialog is reused.
    pendingAnswer?.(!dialog.open && dialog.returnValue === "ok");
    dialog.querySelector("#confirm-text").textContent = text;
    dialog.querySelector("#confirm-ok").textContent = okLabel;
    dialog.returnValue = "";
    dialog.showModal();
    return new Promise((resolve) => {
      const answer = (confirmed) => {
        dialog.removeEventListener("close", onClose);
        if (pendingAnswer === answer) pendingAnswer = null;
        resolve(confirmed);
      };
      // A close event that finds the dialog open again belongs to an earlier opening.
      const onClose = () => { if (!dialog.open) answer(dialog.returnValue === "ok"); };
      pendingAnswer = answer;
      dialog.addEventListener("close", onClose);
    });
  }

  async function copyText(text) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      // Clipboard API needs a secure context; fall back to a hidden textarea. Selecting its text takes
      // the focus, given back once it is copied (else it falls to the page when the textarea goes).
      const had = document.activeElement;
      const area = document.createElement("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.style.position = "fixed";
      area.style.opacity = "0";
      document.body.append(area);
      area.select();
      let ok = false;
      try { ok = document.execCommand("copy"); } catch { ok = false; }
      area.remove();
      if (had instanceof HTMLElement && had.isConnected) had.focus({ preventScroll: true });
      return ok;
    }
  }

  function formatTokens(n) {
    if (n === null || n === undefined || Number.isNaN(Number(n))) return "–";
    n = Number(n);
    if (n >= 100000) return `${Math.round(n / 1000)}k`;
    if (n >= 1000) return `${(n / 1000).toFixed(1).replace(/\.0$/, "")}k`;
    return String(n);
  }

  // Flash messages (base.html) go into the live region once the page is up, so that they are read out,
  // and fade after a while.
  function flashShow() {
    const flash = document.getElementById("flash-toasts");
    const box = document.getElementById("toasts");
    if (!flash || !box) return;
    const shown = [...flash.content.children];
    box.append(...shown);
    flash.remove();
    shown.forEach((el) => setTimeout(() => el.remove(), 4500));
  }

  document.addEventListener("DOMContentLoaded", () => {
    // A beat after the load: a change made as the page is being taken in is missed by screen readers.
    setTimeout(flashShow, 150);
    // A change a form post made (Settings' Archived chats: no api() call told it), told by the page it led to.
    const told = document.getElementById("tabs-told");
    if (told) tellTabs(JSON.parse(told.textContent));
  });

  return { csrfToken, api, getJSON, errorText, toast, confirmAction, copyText, formatTokens, tellTabs, hearTabs, signedOut };
})();
