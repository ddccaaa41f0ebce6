/* One reply over Server-Sent Events: send, regenerate, retry, stop. */
import { setSiblings } from "./branches.js";
import { announce, announceReplyEnd, buildMessage, enhance, keepEnd, markLastReply, moveFocusOff, scrollToBottom, setMessageId, setModel, setPinned, setPlace, setStatus, showCutNote, showError, typingDots } from "./dom.js";
import { refreshGauge, showDecision, updateGauge } from "./gauge.js";
import { catchUp, followedReply, followLost, showMissedBefore } from "./history.js";
import { refreshJobs } from "./jobs.js";
import { listAfterReply } from "./sidebar.js";
import { markupAppend, markupShow } from "./progressive.js";
import { parseEvent } from "./sse.js";
import { thinkingAdd, thinkingEnd, thinkingShown } from "./thinking.js";
import { titleFollow, titleFromStream } from "./title_follow.js";
import { api, app, busyHint, csrfToken, errorText, hint, input, messagesEl, modelInUse, sendBtn, state, stopBtn, tellTabs, toast } from "./state.js";

export function setStreaming(on) {
  // The box stays open: the next message can be written while this reply streams (Enter waits for it).
  hint.hidden = on;
  input.setAttribute("aria-describedby", on ? busyHint.id : hint.id);
  busyHint.hidden = !on;
  // Send pressed from the keyboard hides as Stop shows in its place: the focus goes to Stop (and
  // from Stop, when the reply ends, to the message box) rather than to the page.
  const pressed = document.activeElement === (on ? sendBtn : stopBtn);
  sendBtn.hidden = on;
  stopBtn.hidden = !on;
  app.classList.toggle("is-streaming", on);
  if (on && pressed) stopBtn.focus();
  if (!on) {
    state.streaming = null;
    // With a mouse, back to the box, but never out of a field the user is typing in (a rename, search).
    const free = [document.body, null, input].includes(document.activeElement);
    if (pressed || (free && window.matchMedia("(hover: hover)").matches)) input.focus();
    document.dispatchEvent(new CustomEvent("longchat:reply-ended")); // a message queued meanwhile goes now
  }
}

/**
 * POST to an SSE endpoint and drive one assistant bubble.
 * ctx: {userEl?: element of an optimistic user message, asstEl: assistant bubble, onRejected?}
 */
export async function runStream(url, body, ctx) {
  const controller = new AbortController();
  state.streaming = { assistantId: null, controller, stopRequested: false };
  setStreaming(true);
  announce("The assistant is replying…");
  const { asstEl } = ctx;
  const contentEl = asstEl.querySelector(".msg-content");
  contentEl.replaceChildren(typingDots());
  asstEl.classList.add("is-streaming");
  asstEl.setAttribute("aria-busy", "true"); // not read token by token; #stream-status says when it ends
  let text = "";
  let finished = false;
  let summaryRequested = false; // `start` or `done` said a summary job is being asked for
  let userId = ctx.userId || null;
  // The message as stored: at `accepted` (first, before the context is packed) and again at `start`.
  function stored(data) {
    titleFromStream(data.title);
    modelInUse(data.model);
    if (data.user_message && data.user_message.id) {
      userId = data.user_message.id;
      if (ctx.userEl) {
        setMessageId(ctx.userEl, data.user_message.id, data.user_message.created_at);
        setPlace(ctx.userEl, data.user_message.place);
        setPinned(ctx.userEl, data.user_message.pinned); // an edit of a pinned message keeps the pin
        setSiblings(ctx.userEl, data.user_message);
        if (ctx.onStored) ctx.onStored(data.user_message); // the sender's own follow-up (its images' addresses)
        const parent = data.user_message.parent;
        // Once: `start` repeats what `accepted` said.
        if (parent && !ctx.caughtUp && !document.getElementById(`m-${parent}`)) {
          ctx.caughtUp = true;
          showMissedBefore(ctx.userEl, data.user_message);
        }
      }
    }
  }

  const handlers = {
    accepted: stored,
    start(data) {
      stored(data);
      if (data.assistant_message) {
        setMessageId(asstEl, data.assistant_message.id);
        setPlace(asstEl, data.assistant_message.place);
        asstEl.dataset.replyTo = String(userId || "");
        state.streaming.assistantId = data.assistant_message.id;
        tellTabs({ turn: state.conversationId }); // the question stored: the chat's other tabs show it (tab_sync.js)
        // Stop was pressed before the reply had an id: send it now.
        if (state.streaming.stopRequested) stop(true);
      }
      if (data.context) showDecision(data.context);
    },
    reasoning(data) { thinkingAdd(asstEl, data.text || ""); },
    delta(data) {
      if (!text) { contentEl.replaceChildren(); thinkingEnd(asstEl); }
      text += data.text || "";
      // Text only: the model's output is never read as HTML here (markup events are the server's).
      markupAppend(contentEl, data.text || "");
    },
    markup(data) { markupShow(contentEl, data.html || "", text); },
    done(data) {
      finished = true;
      const m = data.message || {};
      contentEl.classList.remove("is-plain");
      contentEl.innerHTML = m.html || ""; // server-rendered and sanitized
      thinkingShown(asstEl, m.reasoning);
      asstEl.querySelector(".msg-source").value = m.content ?? text;
      setMessageId(asstEl, m.id, m.created_at);
      setStatus(asstEl, m.status || "complete");
      setModel(asstEl, m.model);
      setSiblings(asstEl, m);
      enhance(asstEl);
      markLastReply(asstEl);
      showCutNote(asstEl, m);
      if (data.context) updateGauge(data.context);
      titleFromStream(data.title);
      if (data.title_pending) titleFollow(state.conversationId, data.title);
      announceReplyEnd(m.status || "complete", { cut: m.finish_reason === "length" });
    },
    error(data) {
      finished = true;
      const m = data.message || {};
      contentEl.classList.remove("is-plain");
      if (m.html !== undefined) contentEl.innerHTML = m.html || "";
      else contentEl.textContent = text;
      thinkingShown(asstEl, m.reasoning); // stopped or failed after a block the template opened
      asstEl.querySelector(".msg-source").value = m.content ?? text;
      setMessageId(asstEl, m.id, m.created_at);
      const status = m.status || "error";
      setStatus(asstEl, status);
      setModel(asstEl, m.model);
      setSiblings(asstEl, m);
      enhance(asstEl);
      markLastReply(asstEl);
      // A stopped reply is the user's doing: its "Stopped" badge says so, as after a reload (no error box nor Retry).
      if (status !== "stopped" && (status === "error" || data.error)) {
        // Nothing to retry in a conversation deleted meanwhile (another tab).
        showError(asstEl, data.error || "The model request failed.", { retry: data.kind !== "gone", userId, wait: data.retry_after });
      }
      if (data.context) updateGauge(data.context);
      announceReplyEnd(status === "stopped" ? "stopped" : "error", { error: data.error || "" });
    },
  };

  let response;
  try {
    response = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      // JSON is listed too: errors before state.streaming come back as JSON.
      headers: { "Content-Type": "application/json", Accept: "text/event-stream, application/json", "X-CSRFToken": csrfToken() },
      body: JSON.stringify(body || {}),
      signal: controller.signal,
    });
  } catch (err) {
    const msg = "Could not reach the server. Check your connection and try again.";
    setStreaming(false);
    if (ctx.onRejected && !(err && err.name === "AbortError")) {
      // No answer at all: as for a refusal, the caller gives the text back. A Retry on this bubble
      // would find no stored message of its own and retry an older one.
      ctx.onRejected(msg, 0);
      return;
    }
    asstEl.classList.remove("is-streaming"); asstEl.removeAttribute("aria-busy");
    contentEl.replaceChildren();
    setStatus(asstEl, "error");
    showError(asstEl, msg, { userId });
    return;
  }

  const type = response.headers.get("Content-Type") || "";
  if (!response.ok || !type.includes("text/event-stream")) {
    const data = type.includes("json") ? await response.json().catch(() => null) : null;
    let msg = errorText(data, response.status);
    if (response.status === 429 && !/wait|slow|quickly|too many/i.test(msg)) msg = `You are sending messages too quickly. ${msg}`;
    // Only a chat deleted since the page drew it (another tab or device) is not found: said so, not in
    // the server's words, which name a database row ("No Conversation matches the given query.").
    if (response.status === 404) msg = "This chat no longer exists: it was deleted (in another tab or device?).";
    setStreaming(false);
    if (ctx.onRejected) ctx.onRejected(msg, response.status, data);
    return;
  }

  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const raw = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const ev = parseEvent(raw);
        if (ev && handlers[ev.name]) keepEnd(() => handlers[ev.name](ev.data));
        if (ev && ev.data && ev.data.summary_requested) summaryRequested = true;
      }
    }
  } catch (err) {
    if (!(err && err.name === "AbortError")) console.warn("stream read failed", err);
  }

  thinkingEnd(asstEl); // a reply that ended while the model was still thinking
  let lost = false; // the connection closed without a final event: what arrived is kept
  if (!finished) {
    asstEl.classList.remove("is-streaming"); asstEl.removeAttribute("aria-busy");
    if (!text) contentEl.replaceChildren();
    lost = !(state.streaming && state.streaming.stopRequested);
    if (!lost) { contentEl.classList.remove("is-plain"); setStatus(asstEl, "stopped"); }
    markLastReply(asstEl);
  }
  setStreaming(false);
  if (lost) followLost(asstEl, userId); // after setStreaming: the reply is no longer the page's own
  // The gauge first: a "compact now?" question quotes its percentage.
  await refreshGauge();
  refreshJobs({ restart: true, expectNew: summaryRequested });
  listAfterReply();
}

/** Regenerate, Retry and Edit wait for a reply that is streaming (this page's, or one it follows): said so. */
export function busyNow() {
  const busy = Boolean(state.streaming || followedReply());
  if (busy) toast("A reply is still being written: stop it or wait for it first.");
  return busy;
}

export async function regenerate(article) {
  if (busyNow()) return;
  const id = article.dataset.id;
  const asstEl = buildMessage("assistant", "");
  // The new reply streams in the old one's place, under the same question; the old one is out of
  // view meanwhile and comes back if nothing replaces it.
  const previous = article;
  previous.after(asstEl);
  moveFocusOff(previous); // its Regenerate button goes out of view with it
  previous.hidden = true;
  scrollToBottom(true);
  await runStream(`/api/messages/${id}/regenerate/`, {}, {
    asstEl,
    userId: article.dataset.replyTo ? Number(article.dataset.replyTo) : null,
    onRejected(msg, status) {
      asstEl.remove();
      previous.hidden = false;
      markLastReply(previous);
      toast(msg, "error", 5000);
      if (status === 400 || status === 409) catchUp(); // refused as not the latest: another tab went on
    },
  });
  // The old reply is a branch now (‹ n/m › on the new one reaches it), no longer on the page's path.
  if (asstEl.isConnected && asstEl.dataset.id && asstEl.dataset.id !== id) previous.remove();
  else previous.hidden = false;
}

export function userIdFor(article) {
  if (article.dataset.replyTo) return Number(article.dataset.replyTo);
  let prev = article.previousElementSibling;
  while (prev && !(prev.classList.contains("msg--user") && prev.dataset.id)) prev = prev.previousElementSibling;
  return prev ? Number(prev.dataset.id) : null;
}

export async function retry(article) {
  if (busyNow()) return;
  const userId = userIdFor(article);
  if (!userId) { toast("Nothing to retry.", "error"); return; }
  // The failed reply (and its Retry button) gives way to the new one.
  moveFocusOff(article);
  const box = article.querySelector(".msg-error .btn");
  if (box) box.remove();
  const asstEl = buildMessage("assistant", "");
  messagesEl.append(asstEl);
  scrollToBottom(true);
  await runStream(`/api/messages/${userId}/retry/`, {}, {
    asstEl,
    userId,
    onRejected(msg, status) {
      asstEl.remove();
      showError(article, msg, { userId, retry: article.classList.contains("is-last") });
      if (status === 400 || status === 409) catchUp();
    },
  });
  // The failed reply is a branch now (‹ n/m › on the new one reaches it).
  if (article.dataset.role === "assistant" && asstEl.isConnected && asstEl.dataset.id
      && asstEl.dataset.id !== article.dataset.id) article.remove();
}

export async function stop(again = false) {
  if (!state.streaming || (state.streaming.stopRequested && !again)) return;
  state.streaming.stopRequested = true;
  // Disabled meanwhile, the button loses the focus: given back after (or, the reply over and the
  // button gone, to the message box), unless it went somewhere else meanwhile.
  const hadFocus = document.activeElement === stopBtn;
  stopBtn.disabled = true;
  const current = state.streaming;
  if (current.assistantId) await api(`/api/messages/${current.assistantId}/stop/`, { method: "POST", body: {} });
  // The server ends the stream with the partial reply marked stopped; if it does not, cut it here. Not before
  // `start`, which sends the stop: a client gone then is one whose message the server answers all the same.
  if (current.assistantId) setTimeout(() => { if (state.streaming === current) current.controller.abort(); }, 4000);
  stopBtn.disabled = false;
  if (hadFocus && (!document.activeElement || document.activeElement === document.body)) (stopBtn.hidden ? input : stopBtn).focus();
}
