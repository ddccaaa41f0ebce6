/* The chat page: streaming replies over SSE, sidebar, pins, gauge, summaries. Plain JS, no framework.
 *
 * Safety rule: model text is only ever inserted as text (textContent) while it streams. The only HTML
 * inserted comes from the server, already rendered and sanitized (SSE `html`, page fragments).
 */
"use strict";

(() => {
  const { api, errorText, toast, confirmAction, copyText, formatTokens, csrfToken } = Longchat;

  const app = document.getElementById("app");
  if (!app) return;
  const messagesEl = document.getElementById("messages");
  const timeline = document.getElementById("timeline");
  const form = document.getElementById("composer");
  const input = document.getElementById("composer-input");
  const sendBtn = document.getElementById("send-btn");
  const stopBtn = document.getElementById("stop-btn");
  const statusEl = document.getElementById("stream-status");
  const emptyState = document.getElementById("empty-state");
  const jobBanner = document.getElementById("job-banner");
  const maxChars = Number(app.dataset.maxChars || 0);

  let conversationId = app.dataset.conversationId ? Number(app.dataset.conversationId) : null;
  let streaming = null; // {assistantId, controller, stopRequested}
  let lastGauge = null;
  let summaryApi = true; // false once the summary endpoints answer 404 (not deployed)
  let jobPoll = null;
  const pageLoadedAt = Date.now();

  /* ---------------- helpers ---------------- */

  const el = (tag, cls, text) => {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined) node.textContent = text;
    return node;
  };
  const icon = (name) => {
    const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("class", "i");
    const use = document.createElementNS("http://www.w3.org/2000/svg", "use");
    use.setAttribute("href", `#i-${name}`);
    svg.append(use);
    return svg;
  };
  const announce = (text) => { statusEl.textContent = text; };

  function nearBottom() {
    return timeline.scrollHeight - timeline.scrollTop - timeline.clientHeight < 160;
  }
  function scrollToBottom(force = false) {
    if (force || nearBottom()) {
      timeline.style.scrollBehavior = "auto";
      timeline.scrollTop = timeline.scrollHeight;
      timeline.style.scrollBehavior = "";
    }
  }

  const jumpBtn = document.getElementById("jump-btn");
  const hint = document.getElementById("composer-hint");
  const busyHint = document.getElementById("composer-hint-busy");
  timeline.addEventListener("scroll", () => { jumpBtn.hidden = nearBottom(); }, { passive: true });

  /* ---------------- code blocks ---------------- */

  function enhance(root) {
    root.querySelectorAll(".md pre").forEach((pre) => {
      if (pre.parentElement.classList.contains("code-block")) return;
      const wrap = el("div", "code-block");
      const head = el("div", "code-head");
      head.append(el("span", "code-lang", pre.dataset.lang || "text"));
      const btn = el("button", "copy-btn");
      btn.type = "button";
      btn.dataset.action = "copy-code";
      btn.setAttribute("aria-label", "Copy code");
      btn.append(icon("copy"), el("span", "", "Copy"));
      head.append(btn);
      pre.replaceWith(wrap);
      wrap.append(head, pre);
    });
  }

  /* ---------------- message DOM ---------------- */

  function metaRow(role) {
    const meta = el("div", "msg-meta");
    meta.append(el("span", "msg-author", role === "user" ? "You" : "Assistant"));
    const pin = el("span", "badge badge--pin");
    pin.hidden = true;
    pin.append(icon("pin"), document.createTextNode("Pinned · always sent"));
    meta.append(pin);
    meta.append(el("span", "badge badge--muted badge--outside", "Not sent verbatim"));
    meta.append(el("span", "badge badge--info badge--recalled", "Recalled for the latest message"));
    return meta;
  }

  function actionsRow(isAssistant) {
    const actions = el("div", "msg-actions");
    const copy = el("button", "icon-btn icon-btn--sm");
    copy.type = "button";
    copy.dataset.action = "copy-message";
    copy.title = "Copy";
    copy.setAttribute("aria-label", "Copy message");
    copy.append(icon("copy"));
    actions.append(copy);
    if (isAssistant) {
      const regen = el("button", "icon-btn icon-btn--sm");
      regen.type = "button";
      regen.dataset.action = "regenerate";
      regen.title = "Regenerate";
      regen.setAttribute("aria-label", "Regenerate reply");
      regen.hidden = true;
      regen.append(icon("refresh"));
      actions.append(regen);
    }
    const wrap = el("div", "menu-wrap");
    const more = el("button", "icon-btn icon-btn--sm");
    more.type = "button";
    more.dataset.action = "message-menu";
    more.setAttribute("aria-haspopup", "menu");
    more.setAttribute("aria-expanded", "false");
    more.setAttribute("aria-label", "More actions");
    more.title = "More";
    more.append(icon("more"));
    const menu = el("div", "menu");
    menu.setAttribute("role", "menu");
    menu.hidden = true;
    const pinItem = el("button");
    pinItem.type = "button";
    pinItem.setAttribute("role", "menuitem");
    pinItem.dataset.action = "toggle-pin";
    pinItem.append(icon("pin"), el("span", "", "Pin — always send to the model"));
    menu.append(pinItem);
    wrap.append(more, menu);
    actions.append(wrap);
    return actions;
  }

  function buildMessage(role, content) {
    const article = el("article", `msg msg--${role}`);
    article.dataset.role = role;
    article.dataset.pinned = "0";
    if (role === "assistant") {
      const avatar = el("div", "msg-avatar");
      avatar.setAttribute("aria-hidden", "true");
      avatar.append(icon("bolt"));
      article.append(avatar);
    }
    const body = el("div", "msg-body");
    body.append(metaRow(role));
    const contentEl = el("div", role === "user" ? "msg-content msg-content--plain" : "msg-content md is-plain");
    if (role === "user") contentEl.textContent = content;
    body.append(contentEl);
    body.append(actionsRow(role === "assistant"));
    const source = el("textarea", "msg-source");
    source.hidden = true;
    source.value = content || "";
    body.append(source);
    article.append(body);
    return article;
  }

  function setMessageId(article, id) {
    if (!id) return;
    article.dataset.id = String(id);
    article.id = `m-${id}`;
  }

  // A message's place in the context ("static", "window", "evicted"; none: never sent as itself),
  // as the server computes it with the optimizer's layout rule. The page never derives it.
  function setPlace(article, place) {
    if (place) article.dataset.place = place;
    else delete article.dataset.place;
  }

  function addBadge(article, cls, text, title) {
    const meta = article.querySelector(".msg-meta");
    const badge = el("span", `badge ${cls}`, text);
    if (title) badge.title = title;
    const model = meta.querySelector(".msg-model, .msg-time");
    meta.insertBefore(badge, model);
    return badge;
  }

  function setStatus(article, status) {
    article.dataset.status = status;
    article.classList.toggle("is-stopped", status === "stopped");
    article.classList.toggle("is-error", status === "error");
    article.classList.remove("is-streaming");
    article.querySelectorAll(".badge--warn, .badge--danger, .badge--info").forEach((b) => b.remove());
    if (status === "stopped") addBadge(article, "badge--warn", "Stopped", "Stopped replies are not sent to the model again.");
    if (status === "error") addBadge(article, "badge--danger", "Failed");
  }

  function setModel(article, model) {
    if (!model) return;
    const meta = article.querySelector(".msg-meta");
    let m = meta.querySelector(".msg-model");
    if (!m) { m = el("span", "msg-model"); meta.append(m); }
    m.textContent = model;
  }

  function markLastReply(article) {
    messagesEl.querySelectorAll('[data-action="regenerate"]').forEach((b) => { b.hidden = true; });
    messagesEl.querySelectorAll(".msg.is-last").forEach((m) => m.classList.remove("is-last"));
    if (!article) return;
    article.classList.add("is-last");
    const regen = article.querySelector('[data-action="regenerate"]');
    if (regen) regen.hidden = false;
  }

  function markSuperseded(article) {
    article.classList.add("is-superseded");
    setPlace(article, null); // a regenerated-away reply is never sent again, whatever the window
    article.classList.remove("is-last");
    if (!article.querySelector(".badge--superseded")) {
      addBadge(article, "badge--muted badge--superseded", "Regenerated · not sent to the model",
        "This reply was regenerated; it stays here for reference but is not sent to the model.");
    }
    const err = article.querySelector(".msg-error .btn");
    if (err) err.remove();
  }

  function showError(article, text, { retry = true, userId = null } = {}) {
    let box = article.querySelector(".msg-error");
    if (!box) {
      box = el("div", "msg-error");
      box.setAttribute("role", "alert");
      box.append(icon("alert"), el("span", "msg-error-text"));
      article.querySelector(".msg-body").insertBefore(box, article.querySelector(".msg-actions"));
    }
    box.querySelector(".msg-error-text").textContent = text;
    box.querySelectorAll(".btn").forEach((b) => b.remove());
    if (retry) {
      const btn = el("button", "btn btn--sm", "Retry");
      btn.type = "button";
      btn.dataset.action = "retry";
      if (userId) article.dataset.replyTo = String(userId);
      box.append(btn);
    }
  }

  function typingDots() {
    const dots = el("span", "typing");
    dots.setAttribute("aria-hidden", "true");
    dots.append(el("span"), el("span"), el("span"));
    return dots;
  }

  /* ---------------- streaming ---------------- */

  function setStreaming(on) {
    input.disabled = on;
    hint.hidden = on;
    busyHint.hidden = !on;
    sendBtn.hidden = on;
    stopBtn.hidden = !on;
    app.classList.toggle("is-streaming", on);
    if (!on) {
      streaming = null;
      if (window.matchMedia("(hover: hover)").matches) input.focus();
    }
  }

  function parseEvent(raw) {
    let name = "message";
    const data = [];
    for (const line of raw.split("\n")) {
      if (line.startsWith("event:")) name = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
    }
    if (!data.length) return null;
    try {
      return { name, data: JSON.parse(data.join("\n")) };
    } catch {
      return null;
    }
  }

  /**
   * POST to an SSE endpoint and drive one assistant bubble.
   * ctx: {userEl?: element of an optimistic user message, asstEl: assistant bubble, onRejected?}
   */
  async function runStream(url, body, ctx) {
    const controller = new AbortController();
    streaming = { assistantId: null, controller, stopRequested: false };
    setStreaming(true);
    announce("The assistant is replying…");
    const { asstEl } = ctx;
    const contentEl = asstEl.querySelector(".msg-content");
    contentEl.replaceChildren(typingDots());
    asstEl.classList.add("is-streaming");
    let text = "";
    let finished = false;
    let userId = ctx.userId || null;

    const handlers = {
      start(data) {
        if (data.title) setTitle(data.title);
        if (data.user_message && data.user_message.id) {
          userId = data.user_message.id;
          if (ctx.userEl) {
            setMessageId(ctx.userEl, data.user_message.id);
            setPlace(ctx.userEl, data.user_message.place);
          }
        }
        if (data.assistant_message) {
          setMessageId(asstEl, data.assistant_message.id);
          setPlace(asstEl, data.assistant_message.place);
          asstEl.dataset.replyTo = String(userId || "");
          streaming.assistantId = data.assistant_message.id;
          // Stop was pressed before the reply had an id: send it now.
          if (streaming.stopRequested) stop(true);
        }
        if (data.context) showDecision(data.context);
      },
      delta(data) {
        if (!text) contentEl.replaceChildren();
        text += data.text || "";
        // Text only: never interpret model output as HTML while it streams.
        contentEl.append(document.createTextNode(data.text || ""));
        scrollToBottom();
      },
      done(data) {
        finished = true;
        const m = data.message || {};
        contentEl.classList.remove("is-plain");
        contentEl.innerHTML = m.html || ""; // server-rendered and sanitized
        asstEl.querySelector(".msg-source").value = m.content ?? text;
        setMessageId(asstEl, m.id);
        setStatus(asstEl, m.status || "complete");
        setModel(asstEl, m.model);
        enhance(asstEl);
        markLastReply(asstEl);
        if (data.context) updateGauge(data.context);
        if (data.title) setTitle(data.title);
        announce(m.status === "stopped" ? "Reply stopped." : "Reply finished.");
      },
      error(data) {
        finished = true;
        const m = data.message || {};
        contentEl.classList.remove("is-plain");
        if (m.html !== undefined) contentEl.innerHTML = m.html || "";
        else contentEl.textContent = text;
        asstEl.querySelector(".msg-source").value = m.content ?? text;
        setMessageId(asstEl, m.id);
        const status = m.status || "error";
        setStatus(asstEl, status);
        enhance(asstEl);
        markLastReply(asstEl);
        // A stopped reply is the user's doing, not a failure: its "Stopped" badge says so, as after
        // a reload (no error box, no Retry that the reloaded page would not have).
        if (status !== "stopped" && (status === "error" || data.error)) {
          showError(asstEl, data.error || "The model request failed.", { retry: true, userId });
        }
        if (data.context) updateGauge(data.context);
        announce(status === "stopped" ? "Reply stopped." : `Reply failed: ${data.error || ""}`);
      },
    };

    let response;
    try {
      response = await fetch(url, {
        method: "POST",
        credentials: "same-origin",
        // JSON is listed too: errors before streaming come back as JSON.
        headers: { "Content-Type": "application/json", Accept: "text/event-stream, application/json", "X-CSRFToken": csrfToken() },
        body: JSON.stringify(body || {}),
        signal: controller.signal,
      });
    } catch (err) {
      asstEl.classList.remove("is-streaming");
      contentEl.replaceChildren();
      setStatus(asstEl, "error");
      showError(asstEl, "Could not reach the server. Check your connection and try again.", { userId });
      setStreaming(false);
      return;
    }

    const type = response.headers.get("Content-Type") || "";
    if (!response.ok || !type.includes("text/event-stream")) {
      const data = type.includes("json") ? await response.json().catch(() => null) : null;
      let msg = errorText(data, response.status);
      if (response.status === 429 && !/wait|slow|too many/i.test(msg)) msg = `You are sending messages too quickly. ${msg}`;
      setStreaming(false);
      if (ctx.onRejected) ctx.onRejected(msg, response.status);
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
          if (ev && handlers[ev.name]) handlers[ev.name](ev.data);
        }
      }
    } catch (err) {
      if (!(err && err.name === "AbortError")) console.warn("stream read failed", err);
    }

    if (!finished) {
      // The connection closed without a final event: keep what arrived and say so.
      asstEl.classList.remove("is-streaming");
      contentEl.classList.remove("is-plain");
      if (!text) contentEl.replaceChildren();
      if (streaming && streaming.stopRequested) {
        setStatus(asstEl, "stopped");
      } else {
        setStatus(asstEl, "error");
        showError(asstEl, "The connection closed before the reply finished. What arrived is kept; reload to see the saved state.", { userId });
      }
      markLastReply(asstEl);
    }
    setStreaming(false);
    // The gauge first: a "compact now?" question quotes its percentage.
    await refreshGauge();
    refreshJobs({ restart: true });
    // The conversation moved to the top of the list (and may have a new title).
    if (!document.querySelector(".conv-rename")) refreshSidebar();
  }

  /** A random idempotency key (crypto.randomUUID needs a secure context; getRandomValues does not). */
  function sendKey() {
    const bytes = crypto.getRandomValues(new Uint8Array(16));
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  async function ensureConversation() {
    if (conversationId) return conversationId;
    const body = picker && picker.value ? modelChoice(picker.value) : {};
    const res = await api("/api/conversations/", { method: "POST", body });
    if (!res.ok || !res.data || !res.data.id) {
      throw new Error(errorText(res.data, res.status));
    }
    conversationId = res.data.id;
    app.dataset.conversationId = String(conversationId);
    history.replaceState(null, "", `/c/${conversationId}/`);
    document.getElementById("conv-tools").hidden = false;
    if (picker) picker.dataset.current = picker.value;
    document.querySelectorAll("[data-dashboard-link]").forEach((a) => { a.href = `/c/${conversationId}/dashboard/`; });
    const renameBtn = document.querySelector('[data-action="rename-current"]');
    if (renameBtn) renameBtn.hidden = false;
    refreshSidebar();
    return conversationId;
  }

  function showComposerError(text) {
    clearComposerError();
    const box = el("div", "inline-error");
    box.id = "composer-error";
    box.setAttribute("role", "alert");
    box.append(icon("alert"), el("span", "", text));
    messagesEl.after(box);
    scrollToBottom(true);
  }
  function clearComposerError() {
    const old = document.getElementById("composer-error");
    if (old) old.remove();
  }

  async function sendMessage(content) {
    clearComposerError();
    const compact = content.match(/^\/compact(?:\s+([\s\S]*))?$/);
    if (compact) {
      input.value = "";
      autosize();
      await compactNow((compact[1] || "").trim());
      return;
    }
    if (maxChars && content.length > maxChars) {
      showComposerError(`This message is ${content.length.toLocaleString()} characters; the limit is ${maxChars.toLocaleString()}.`);
      return;
    }
    let pk;
    try {
      pk = await ensureConversation();
    } catch (err) {
      showComposerError(`Could not start a new chat: ${err.message}`);
      return;
    }
    emptyState.hidden = true;
    const userEl = buildMessage("user", content);
    const asstEl = buildMessage("assistant", "");
    messagesEl.append(userEl, asstEl);
    scrollToBottom(true);
    input.value = "";
    autosize();
    // One key per send: if the request is repeated (a double submit, a network retry) the server
    // stores the message once.
    await runStream(`/api/conversations/${pk}/messages/`, { content, client_key: sendKey() }, {
      userEl,
      asstEl,
      onRejected(msg) {
        // Rejected before streaming: nothing was stored, so take the bubbles back and restore the text.
        userEl.remove();
        asstEl.remove();
        input.value = content;
        autosize();
        showComposerError(msg);
        if (!messagesEl.querySelector(".msg")) emptyState.hidden = false;
      },
    });
  }

  async function regenerate(article) {
    if (streaming) return;
    const id = article.dataset.id;
    const asstEl = buildMessage("assistant", "");
    messagesEl.append(asstEl);
    scrollToBottom(true);
    const previous = article;
    await runStream(`/api/messages/${id}/regenerate/`, {}, {
      asstEl,
      userId: article.dataset.replyTo ? Number(article.dataset.replyTo) : null,
      onRejected(msg) {
        asstEl.remove();
        markLastReply(previous);
        toast(msg, "error", 5000);
      },
    });
    if (asstEl.isConnected && asstEl.dataset.id && asstEl.dataset.id !== id) markSuperseded(previous);
  }

  function userIdFor(article) {
    if (article.dataset.replyTo) return Number(article.dataset.replyTo);
    let prev = article.previousElementSibling;
    while (prev && !(prev.classList.contains("msg--user") && prev.dataset.id)) prev = prev.previousElementSibling;
    return prev ? Number(prev.dataset.id) : null;
  }

  async function retry(article) {
    if (streaming) return;
    const userId = userIdFor(article);
    if (!userId) { toast("Nothing to retry.", "error"); return; }
    const box = article.querySelector(".msg-error .btn");
    if (box) box.remove();
    const asstEl = buildMessage("assistant", "");
    messagesEl.append(asstEl);
    scrollToBottom(true);
    await runStream(`/api/messages/${userId}/retry/`, {}, {
      asstEl,
      userId,
      onRejected(msg) {
        asstEl.remove();
        showError(article, msg, { userId });
      },
    });
  }

  async function stop(again = false) {
    if (!streaming || (streaming.stopRequested && !again)) return;
    streaming.stopRequested = true;
    stopBtn.disabled = true;
    const current = streaming;
    if (current.assistantId) {
      await api(`/api/messages/${current.assistantId}/stop/`, { method: "POST", body: {} });
    }
    // The server ends the stream with the partial reply marked stopped; if it does not, cut it here.
    setTimeout(() => { if (streaming === current) current.controller.abort(); }, 4000);
    stopBtn.disabled = false;
  }

  /* ---------------- title & sidebar ---------------- */

  function setTitle(title) {
    const h1 = document.getElementById("chat-title");
    if (h1) { h1.textContent = title; h1.title = title; }
    document.title = `${title} · Longchat`;
    const item = document.querySelector(`.conv-item[data-id="${conversationId}"] .conv-title`);
    if (item) item.textContent = title;
    else refreshSidebar();
  }

  const nav = document.getElementById("conv-nav");
  const searchInput = document.getElementById("chat-search");
  let searchTimer = null;
  let searchSeq = 0;

  async function refreshSidebar() {
    const seq = ++searchSeq;
    const params = new URLSearchParams({ q: searchInput.value.trim(), current: conversationId || "" });
    const url = `${searchInput.form.dataset.sidebarUrl}?${params}`;
    try {
      const res = await fetch(url, { credentials: "same-origin" });
      if (!res.ok || seq !== searchSeq) return;
      nav.innerHTML = await res.text(); // server-rendered, autoescaped fragment
    } catch { /* keep the current list */ }
  }

  searchInput.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(refreshSidebar, 220);
  });
  searchInput.form.addEventListener("submit", (e) => { e.preventDefault(); refreshSidebar(); });

  function inlineRename(target, current, onSave) {
    const field = el("input", target.classList.contains("chat-title") ? "title-input" : "conv-rename");
    field.type = "text";
    field.value = current;
    field.maxLength = 200;
    field.setAttribute("aria-label", "Chat title");
    target.hidden = true;
    target.after(field);
    field.focus();
    field.select();
    let done = false;
    const finish = async (save) => {
      if (done) return;
      done = true;
      const value = field.value.trim();
      field.remove();
      target.hidden = false;
      if (save && value && value !== current) await onSave(value);
    };
    field.addEventListener("keydown", (e) => {
      if (e.key === "Enter") { e.preventDefault(); finish(true); }
      if (e.key === "Escape") { e.preventDefault(); finish(false); }
    });
    field.addEventListener("blur", () => finish(true));
  }

  async function renameConversation(id, title) {
    const res = await api(`/api/conversations/${id}/`, { method: "PATCH", body: { title } });
    if (!res.ok) { toast(errorText(res.data, res.status), "error"); return false; }
    const saved = (res.data && res.data.title) || title;
    document.querySelectorAll(`.conv-item[data-id="${id}"] .conv-title`).forEach((t) => { t.textContent = saved; });
    if (Number(id) === conversationId) setTitle(saved);
    return true;
  }

  async function deleteConversation(id, title) {
    const ok = await confirmAction(`Delete “${title}”? Its messages and records are removed for good.`);
    if (!ok) return;
    const res = await api(`/api/conversations/${id}/`, { method: "DELETE" });
    if (!res.ok && res.status !== 404) { toast(errorText(res.data, res.status), "error"); return; }
    if (Number(id) === conversationId) { window.location.href = "/"; return; }
    document.querySelector(`.conv-item[data-id="${id}"]`)?.remove();
    toast("Chat deleted.");
  }

  /* ---------------- gauge & window marker ---------------- */

  const gaugeBtn = document.getElementById("gauge");
  const gaugePop = document.getElementById("gauge-pop");
  const STRATEGY_WORDS = {
    none: "Everything fits: sent verbatim",
    truncate: "Oldest turns dropped to fit",
    summarize: "Older turns summarized",
  };

  function updateGauge(g) {
    if (!gaugeBtn || !g) return;
    lastGauge = { ...(lastGauge || {}), ...g };
    const tokens = Number(g.tokens || 0);
    const budget = Number(g.budget || 0);
    const ratio = g.ratio !== undefined && g.ratio !== null ? Number(g.ratio) : budget ? tokens / budget : 0;
    const pct = Math.max(0, Math.min(100, Math.round(ratio * 100)));
    document.getElementById("gauge-fill").style.width = `${Math.max(pct, tokens ? 2 : 0)}%`;
    document.getElementById("gauge-text").textContent =
      `${g.estimated ? "≈" : ""}${formatTokens(tokens)} / ${formatTokens(budget)}`;
    gaugeBtn.classList.toggle("is-warn", ratio >= 0.7 && ratio < 0.9);
    gaugeBtn.classList.toggle("is-danger", ratio >= 0.9);
    gaugeBtn.setAttribute("aria-label",
      `Context: the next request uses ${tokens.toLocaleString()} of ${budget.toLocaleString()} tokens (${pct}%)`);
    gaugeBtn.title = `Next request: ${tokens.toLocaleString()} of ${budget.toLocaleString()} tokens (${pct}%)`;
    const dl = document.getElementById("gauge-details");
    dl.replaceChildren();
    const row = (k, v) => { dl.append(el("dt", "", k), el("dd", "", v)); };
    row("Next request", `${tokens.toLocaleString()} tokens`);
    row("Budget", `${budget.toLocaleString()} tokens`);
    if (g.history_tokens !== undefined && g.history_tokens !== tokens) {
      row("Whole history", `${Number(g.history_tokens).toLocaleString()} tokens`);
    }
    row("Used", pct === 0 && tokens > 0 ? "under 1%" : `${pct}%`);
    if (lastGauge.strategy) row("Strategy", STRATEGY_WORDS[lastGauge.strategy] || lastGauge.strategy);
    row("Counting", lastGauge.estimated ? "estimated (model unknown to the tokenizer)" : "exact");
    if (lastGauge.recall) row("Recalled", recallWords(lastGauge.recall) + " for your last message");
    if (lastGauge.reason) {
      const reason = el("dd", "gauge-reason", lastGauge.reason);
      dl.append(reason);
    }
    if ("window_start_id" in g) placeWindowMarker(g.window_start_id, lastGauge.strategy);
    // A pending "compact now?" question quotes the gauge: keep the two in step.
    if (currentJob && currentJob.status === "awaiting" && !jobBanner.hidden) renderJob(currentJob);
  }

  // The start event's context is this request's decision; its recall (or null) holds until the next one.
  function showDecision(ctx) {
    lastGauge = { ...(lastGauge || {}), strategy: ctx.strategy, reason: ctx.reason, recall: ctx.recall || null };
  }

  // "4 earlier messages (312 tokens)": the old messages the recall block quoted for one request.
  function recallWords(recall) {
    const n = Number(recall.messages || 0);
    return `${n.toLocaleString()} earlier message${n === 1 ? "" : "s"} (${Number(recall.tokens || 0).toLocaleString()} tokens)`;
  }

  // Messages the latest request quoted are marked where they stand in the timeline.
  function markRecalled() {
    messagesEl.querySelectorAll(".msg.is-recalled").forEach((m) => m.classList.remove("is-recalled"));
    const recall = lastGauge && lastGauge.recall;
    if (!recall || !recall.ids) return 0;
    let shown = 0;
    for (const id of recall.ids) {
      const item = document.getElementById(`m-${id}`);
      if (item && item.classList.contains("msg")) { item.classList.add("is-recalled"); shown += 1; }
    }
    return shown;
  }

  async function refreshGauge() {
    if (!conversationId || !gaugeBtn) return;
    const res = await api(`/api/conversations/${conversationId}/context/`);
    if (res.ok && res.data) updateGauge(res.data);
    else if (!lastGauge) document.getElementById("gauge-text").textContent = "–";
  }

  /** Summaries are stored when they finish; show each right after the last message it covers. */
  function placeSummaries() {
    messagesEl.querySelectorAll(".summary-marker[data-covers-through]").forEach((marker) => {
      const last = document.getElementById(`m-${marker.dataset.coversThrough}`);
      if (last && last.parentElement === messagesEl && last.nextElementSibling !== marker) last.after(marker);
    });
    markSummaryStates();
  }

  /** Only the newest summary not discarded reaches the model: older ones (folded into it) are shown
   *  as replaced, without the tools that would suggest they are in use. */
  function markSummaryStates() {
    const live = [...messagesEl.querySelectorAll(".summary-marker:not(.is-discarded)")];
    const inUse = live.reduce((best, m) => (!best || Number(m.dataset.id) > Number(best.dataset.id) ? m : best), null);
    for (const marker of live) {
      const replaced = marker !== inUse;
      marker.classList.toggle("is-replaced", replaced);
      marker.querySelector(".summary-marker-title").textContent =
        replaced ? "Replaced by a later summary" : "Summary takes over here";
      marker.querySelectorAll(".summary-tools").forEach((tools) => { tools.hidden = replaced; });
    }
  }

  function placeWindowMarker(windowStart, strategy) {
    placeSummaries();
    messagesEl.querySelectorAll(".window-marker").forEach((m) => m.remove());
    messagesEl.querySelectorAll(".msg.is-outside").forEach((m) => m.classList.remove("is-outside"));
    markRecalled();
    const ws = Number(windowStart || 0);
    if (!ws) return;
    const items = [...messagesEl.querySelectorAll(":scope > .msg[data-id]")];
    const coveredThrough = Number((lastGauge && lastGauge.summary_through_id) || 0);
    let anchor = null;
    let outside = 0;
    let uncovered = 0;
    for (const item of items) {
      const id = Number(item.dataset.id);
      if (id >= ws) { anchor = item; break; }
      // The static layer stays whatever the window; the server said which messages belong to it.
      // The window start moves with every gauge update, so the rest is placed against it here.
      const place = item.dataset.place;
      if (place === "window" || place === "evicted") {
        item.classList.add("is-outside");
        outside += 1;
        if (id > coveredThrough) uncovered += 1;
      }
    }
    const hasEarlier = !!document.querySelector('[data-action="load-earlier"]');
    if (!anchor || (!outside && !hasEarlier)) return;
    // Say what the next request really does with them: the summary it sends covers up to
    // `summary_through_id`; anything after that is left out (until a new summary is written, or for
    // good today when the daily limit of automatic summaries turned summaries into truncation).
    const quota = lastGauge && lastGauge.summary_quota_reached;
    const later = quota ? " (today's automatic summaries are used up, so they are truncated)"
      : strategy === "summarize" ? " until the next summary is written" : "";
    let how;
    if (coveredThrough && !uncovered) how = "a summary stands in for them";
    else if (coveredThrough) how = `a summary stands in for the older ones; the later ones are left out${later}`;
    else how = `they were left out to fit the window${later}`;
    const marker = el("div", "window-marker");
    marker.setAttribute("role", "separator");
    const recall = lastGauge && lastGauge.recall;
    const recalled = recall && recall.messages
      ? `; ${recallWords(recall)} ${recall.messages === 1 ? "was" : "were"} recalled for the latest one` : "";
    marker.append(el("span", "", `Earlier messages are not sent verbatim — ${how}${recalled}`));
    anchor.before(marker);
  }

  /* ---------------- summaries (issue 4) ---------------- */

  const ACTIVE_JOB = ["pending", "queued", "running"];
  const POLL_FIRST_MS = 1000;
  const POLL_MAX_MS = 15000;
  let pollDelay = POLL_FIRST_MS;
  let currentJob = null; // newest job of this conversation, as last rendered
  let watchedJobId = null; // a job seen active on this page: its end refreshes the chat in place
  let jobsSeq = 0;
  const DONE_BANNER_MS = 8000;
  let doneBannerTimer = null;
  const dismissedJobs = new Set(); // finished jobs whose banner was closed: not shown again on this page

  function jobDuration(job) {
    if (job.duration_ms !== null && job.duration_ms !== undefined) return job.duration_ms / 1000;
    if (job.started_at && job.finished_at) return (Date.parse(job.finished_at) - Date.parse(job.started_at)) / 1000;
    return null;
  }

  function formatSeconds(secs) {
    if (secs < 10) return `${secs.toFixed(1)} s`;
    if (secs < 90) return `${Math.round(secs)} s`;
    return `${Math.floor(secs / 60)} min ${Math.round(secs % 60)} s`;
  }

  // "Compact now?" speaks of the whole history against the budget (what the trigger measures),
  // not of the already-optimized next request.
  /** The gauge's two figures against the budget: the whole history (what the trigger measures and
   * "compact now?" speaks of) and the next request as optimized (what the gauge bar shows). */
  function gaugePercents() {
    if (!lastGauge || !lastGauge.budget) return null;
    const next = Number(lastGauge.tokens || 0) / Number(lastGauge.budget);
    const history = lastGauge.history_ratio !== undefined && lastGauge.history_ratio !== null
      ? Number(lastGauge.history_ratio) : next;
    return { history: Math.round(history * 100), next: Math.round(next * 100) };
  }

  function bannerButton(label, action, cls = "btn btn--sm") {
    const btn = el("button", cls, label);
    btn.type = "button";
    btn.dataset.action = action;
    return btn;
  }

  function stateChip(text) {
    return el("span", "job-state", text);
  }

  function renderJob(job) {
    currentJob = job;
    clearTimeout(doneBannerTimer);
    jobBanner.replaceChildren();
    jobBanner.className = "job-banner";
    if (!job) { jobBanner.hidden = true; delete jobBanner.dataset.status; return; }
    const status = job.status;
    // Finished jobs are news only if this page saw them run, or they ended moments before it loaded,
    // and only until closed (by hand, or on its own for a success).
    const finishedAt = job.finished_at ? Date.parse(job.finished_at) : 0;
    const fresh = !dismissedJobs.has(job.id) && (job.id === watchedJobId || finishedAt > pageLoadedAt - 60000);
    const text = el("span", "job-text");
    const actions = el("span", "job-actions");
    if (ACTIVE_JOB.includes(status)) {
      jobBanner.classList.add("is-active");
      jobBanner.append(el("span", "spinner"));
      const label = { pending: "Pending", queued: "Queued", running: "Running" }[status];
      text.append(stateChip(label), document.createTextNode(
        status === "running" ? "Summarizing earlier messages in the background…"
          : status === "pending" ? "The job queue is unreachable; the summary starts as soon as it is back."
            : "Summary queued — the chat keeps working meanwhile."));
      if (job.instructions) text.append(el("span", "job-note", `Instructions: “${job.instructions}”`));
    } else if (status === "awaiting") {
      jobBanner.classList.add("is-ask");
      jobBanner.append(icon("compress"));
      const pct = gaugePercents();
      // Each figure says what it measures: the history (the trigger's measure) and, when it differs,
      // the next request the gauge shows.
      text.append(el("strong", "", pct !== null ? `History is ${pct.history}% of the budget — compact now?` : "The history nearly fills the budget — compact now?"));
      if (pct !== null && pct.next !== pct.history) {
        text.append(el("span", "job-note", `The next request, already trimmed, uses ${pct.next}% (the gauge).`));
      }
      text.append(el("span", "job-note", "A summary of the earlier messages would replace them; until then the oldest turns are truncated."));
      actions.append(bannerButton("Not now", "not-now", "btn btn--sm btn--ghost"), bannerButton("Compact now", "compact", "btn btn--sm btn--primary"));
    } else if (status === "done" && fresh) {
      jobBanner.classList.add("is-done");
      jobBanner.append(icon("check"));
      const secs = jobDuration(job);
      text.append(stateChip("Done"), document.createTextNode(
        `Summary ready${secs !== null ? ` in ${formatSeconds(secs)}` : ""}${job.extractive ? " (extractive)" : ""} — the model uses it from your next message.`));
      if (job.summary_id) actions.append(bannerButton("Show it", "show-summary", "btn btn--sm btn--ghost"));
    } else if (status === "failed" && fresh) {
      jobBanner.classList.add("is-failed");
      jobBanner.append(icon("alert"));
      text.append(stateChip("Failed"), document.createTextNode(`Summary failed: ${job.error || "unknown reason"}. `));
      text.append(el("span", "job-note", job.summary_id
        ? "An extractive summary stands in meanwhile."
        : "The chat falls back to truncation; nothing is lost."));
      if (job.summary_id) actions.append(bannerButton("Show it", "show-summary", "btn btn--sm btn--ghost"));
    } else if (status === "cancelled" && job.id === watchedJobId) {
      jobBanner.classList.add("is-muted");
      jobBanner.append(icon("compress"));
      text.append(stateChip("Cancelled"), document.createTextNode(job.error || "Nothing to summarize yet."));
    } else {
      jobBanner.hidden = true;
      delete jobBanner.dataset.status;
      return;
    }
    jobBanner.dataset.status = status;
    jobBanner.dataset.jobId = String(job.id);
    jobBanner.append(text);
    if (!["awaiting", ...ACTIVE_JOB].includes(status)) {
      const close = el("button", "icon-btn icon-btn--sm");
      close.type = "button";
      close.dataset.action = "dismiss-job";
      close.setAttribute("aria-label", "Close");
      close.title = "Close";
      close.append(icon("close"));
      actions.append(close);
    }
    if (actions.childNodes.length) jobBanner.append(actions);
    jobBanner.hidden = false;
    // Good news needs no answer: "Summary ready" leaves by itself, unless the pointer or focus is on it.
    if (status === "done") doneBannerTimer = setTimeout(() => dismissDone(job.id), DONE_BANNER_MS);
  }

  function dismissDone(jobId) {
    if (jobBanner.dataset.jobId !== String(jobId) || jobBanner.dataset.status !== "done") return;
    if (jobBanner.matches(":hover, :focus-within")) {
      doneBannerTimer = setTimeout(() => dismissDone(jobId), 2000);
      return;
    }
    dismissedJobs.add(jobId);
    jobBanner.hidden = true;
    watchedJobId = null;
  }

  /** Polls the job list while a job is active, backing off (1 s → 15 s); stops when nothing runs. */
  async function refreshJobs({ restart = false } = {}) {
    if (!conversationId || !summaryApi) return;
    if (restart) pollDelay = POLL_FIRST_MS;
    clearTimeout(jobPoll);
    jobPoll = null;
    const seq = ++jobsSeq;
    const res = await api(`/api/conversations/${conversationId}/summary-jobs/?limit=1`);
    if (seq !== jobsSeq) return; // a newer refresh is under way
    if (res.status === 404) { summaryApi = false; return; }
    if (!res.ok || !res.data) {
      // A failed poll (server restarting, network blip) is retried later, never given up silently.
      if (watchedJobId) jobPoll = setTimeout(refreshJobs, pollDelay);
      pollDelay = Math.min(pollDelay * 2, POLL_MAX_MS);
      return;
    }
    const jobs = Array.isArray(res.data) ? res.data : res.data.results || [];
    const job = jobs.length ? jobs.reduce((a, b) => (Number(b.id) > Number(a.id) ? b : a)) : null;
    const finished = job && job.id === watchedJobId && !ACTIVE_JOB.includes(job.status);
    if (job && ACTIVE_JOB.includes(job.status)) watchedJobId = job.id;
    renderJob(job);
    if (job && ACTIVE_JOB.includes(job.status)) {
      jobPoll = setTimeout(refreshJobs, pollDelay);
      pollDelay = Math.min(Math.round(pollDelay * 1.6), POLL_MAX_MS);
    } else {
      pollDelay = POLL_FIRST_MS;
    }
    if (finished) await jobFinished(job);
  }

  /** A job this page watched has ended: show its summary and the new gauge without reloading. */
  async function jobFinished(job) {
    if (job.summary_id) {
      const res = await api(`/api/summaries/${job.summary_id}/`);
      if (res.ok && res.data) showSummary(res.data);
    }
    await refreshGauge();
    if (job.status === "done") announce("The summary is ready.");
    else if (job.status === "failed") announce(`The summary failed: ${job.error || ""}`);
  }

  function summaryMeta(m) {
    const parts = [];
    if (m.covered_message_count) parts.push(`covers ${m.covered_message_count} message${m.covered_message_count === 1 ? "" : "s"}`);
    if (m.extractive) parts.push("extractive");
    else if (m.model) parts.push(m.model);
    if (m.edited) parts.push("edited");
    return parts.join(" · ");
  }

  /** The timeline marker of a summary, built from the API's message (its html is sanitized by the server). */
  function buildSummaryMarker(m) {
    const marker = el("details", `summary-marker${m.discarded ? " is-discarded" : ""}`);
    marker.id = `m-${m.id}`;
    marker.dataset.id = String(m.id);
    marker.dataset.kind = "summary";
    if (m.covers_through_id) marker.dataset.coversThrough = String(m.covers_through_id);
    const head = el("summary");
    const chevron = icon("chevron");
    chevron.classList.add("chevron");
    head.append(icon("compress"),
      el("span", "summary-marker-title", m.discarded ? "Discarded summary" : "Summary takes over here"),
      el("span", "summary-marker-meta", summaryMeta(m)), chevron);
    const body = el("div", "summary-body");
    const content = el("div", "md summary-content");
    content.innerHTML = m.html || ""; // server-rendered and sanitized
    body.append(content);
    if (!m.discarded) {
      const tools = el("div", "summary-tools");
      const edit = bannerButton("", "edit-summary", "btn btn--ghost btn--sm");
      edit.append(icon("edit"), document.createTextNode("Edit"));
      const discard = bannerButton("", "discard-summary", "btn btn--ghost btn--sm btn--danger-text");
      discard.append(icon("trash"), document.createTextNode("Discard"));
      tools.append(edit, discard);
      const source = el("textarea", "summary-source");
      source.hidden = true;
      source.value = m.content || "";
      body.append(tools, source);
    }
    marker.append(head, body);
    enhance(marker);
    return marker;
  }

  function showSummary(m) {
    const marker = buildSummaryMarker(m);
    const existing = document.getElementById(`m-${m.id}`);
    if (existing) {
      marker.open = existing.open;
      existing.replaceWith(marker);
    } else {
      messagesEl.append(marker);
    }
    placeWindowMarker(lastGauge ? lastGauge.window_start_id : app.dataset.windowStart, lastGauge && lastGauge.strategy);
    return marker;
  }

  function revealSummary(id) {
    const marker = document.getElementById(`m-${id}`);
    if (!marker) return false;
    marker.open = true;
    marker.scrollIntoView({ block: "center", behavior: "smooth" });
    return true;
  }

  async function compactNow(instructions) {
    if (!conversationId) { toast("Start a chat first: there is nothing to compact yet."); return; }
    const res = await api(`/api/conversations/${conversationId}/compact/`, { method: "POST", body: { instructions } });
    if (res.status === 404) {
      toast("Compaction is not available on this server yet.", "error");
      return;
    }
    if (!res.ok) { toast(errorText(res.data, res.status), "error", 6000); return; }
    // The status line below says what happens next; no toast on top of it.
    announce(instructions ? "Compacting with your instructions." : "Compacting earlier messages.");
    summaryApi = true;
    if (res.data && res.data.id) {
      watchedJobId = res.data.id;
      renderJob(res.data);
    }
    refreshJobs({ restart: true });
  }

  async function dismissAwaiting() {
    const jobId = jobBanner.dataset.jobId;
    if (!conversationId || !jobId) return;
    const res = await api(`/api/conversations/${conversationId}/summary-jobs/${jobId}/dismiss/`, { method: "POST" });
    if (!res.ok) {
      // It started meanwhile (another tab said yes): show what it is doing instead.
      toast(errorText(res.data, res.status), "error", 5000);
      refreshJobs({ restart: true });
      return;
    }
    renderJob(null);
    toast("Not now: older turns keep being truncated. Compact any time with /compact or from the gauge.", "info", 5000);
  }

  /* ---------------- pins, copy, summaries edit ---------------- */

  async function togglePin(article) {
    const pinned = article.dataset.pinned !== "1";
    const res = await api(`/api/messages/${article.dataset.id}/pin/`, { method: "POST", body: { pinned } });
    if (!res.ok) { toast(errorText(res.data, res.status), "error"); return; }
    article.dataset.pinned = pinned ? "1" : "0";
    setPlace(article, res.data && res.data.place);
    article.classList.toggle("is-pinned", pinned);
    article.querySelector(".badge--pin").hidden = !pinned;
    article.querySelector('[data-action="toggle-pin"] span').textContent = pinned ? "Unpin" : "Pin — always send to the model";
    toast(pinned ? "Pinned: this message is always sent to the model." : "Unpinned.");
    refreshGauge();
  }

  async function editSummary(marker) {
    const dialog = document.getElementById("summary-dialog");
    const area = document.getElementById("summary-edit");
    area.value = marker.querySelector(".summary-source").value;
    dialog.returnValue = "";
    dialog.showModal();
    dialog.addEventListener("close", async () => {
      if (dialog.returnValue !== "ok") return;
      const res = await api(`/api/summaries/${marker.dataset.id}/`, { method: "PATCH", body: { content: area.value } });
      if (!res.ok) { toast(errorText(res.data, res.status), "error"); return; }
      // An edit may be stored as a new summary that replaces (and discards) the one edited.
      if (res.data && Number(res.data.id) !== Number(marker.dataset.id)) markSummaryDiscarded(marker);
      showSummary(res.data).open = true;
      toast("Summary saved: the model sees your text from the next message.");
      refreshGauge();
    }, { once: true });
  }

  function markSummaryDiscarded(marker) {
    marker.classList.add("is-discarded");
    marker.querySelector(".summary-marker-title").textContent = "Discarded summary";
    marker.querySelectorAll(".summary-tools, .summary-source").forEach((n) => n.remove());
  }

  async function discardSummary(marker) {
    const ok = await confirmAction(
      "Discard this summary? The next message is packed without it (an earlier summary, if any, takes its place); no message is deleted.",
      "Discard");
    if (!ok) return;
    const id = Number(marker.dataset.id);
    const res = await api(`/api/summaries/${id}/`, { method: "DELETE" });
    if (!res.ok) { toast(errorText(res.data, res.status), "error"); return; }
    // Only this summary (and its edit chain, whose older versions an edit already discarded) goes:
    // an earlier rolling summary is in use again (showSummary re-marks which one).
    showSummary(res.data);
    toast("Summary discarded: the next message is packed without it.");
    refreshGauge();
  }

  async function loadEarlier(btn) {
    btn.disabled = true;
    const res = await fetch(`/c/${conversationId}/messages/?before=${btn.dataset.before}`, { credentials: "same-origin" });
    if (!res.ok) { btn.disabled = false; toast("Could not load earlier messages.", "error"); return false; }
    const html = await res.text();
    const before = timeline.scrollHeight;
    const holder = document.createElement("div");
    holder.innerHTML = html; // server-rendered, sanitized fragment
    enhance(holder);
    messagesEl.prepend(...holder.childNodes);
    timeline.scrollTop += timeline.scrollHeight - before;
    if (res.headers.get("X-Has-Earlier") === "1" && res.headers.get("X-Oldest-Id")) {
      btn.dataset.before = res.headers.get("X-Oldest-Id");
      btn.disabled = false;
    } else {
      btn.parentElement.remove();
    }
    placeWindowMarker(lastGauge ? lastGauge.window_start_id : app.dataset.windowStart, lastGauge && lastGauge.strategy);
    return true;
  }

  async function revealHash() {
    const match = window.location.hash.match(/^#m-(\d+)$/);
    if (!match) return;
    for (let i = 0; i < 100 && !document.getElementById(`m-${match[1]}`); i += 1) {
      const btn = document.querySelector('[data-action="load-earlier"]');
      if (!btn || !(await loadEarlier(btn))) break;
    }
    const target = document.getElementById(`m-${match[1]}`);
    if (target) {
      target.scrollIntoView({ block: "center" });
      target.classList.add("is-flash");
      target.animate([{ background: "var(--accent-soft)" }, { background: "transparent" }], { duration: 2000 });
    }
  }

  const picker = document.getElementById("model-select");

  /** The request body that picks a model: a config id, or the built-in offline demo model. */
  function modelChoice(value) {
    return value === "offline" ? { offline: true } : { llm_config: Number(value) };
  }

  /** The header's model selector: picks the model of a new chat, or switches an existing one. */
  async function switchModel() {
    const option = picker.selectedOptions[0];
    const previous = picker.dataset.current;
    if (!conversationId) {
      input.placeholder = `Message ${option.textContent}…`;
      return;
    }
    picker.disabled = true;
    const res = await api(`/api/conversations/${conversationId}/`, { method: "PATCH", body: modelChoice(picker.value) });
    picker.disabled = false;
    if (!res.ok) {
      picker.value = previous;
      toast(errorText(res.data, res.status), "error", 5000);
      return;
    }
    picker.dataset.current = picker.value;
    input.placeholder = `Message ${option.textContent}…`;
    toast(`Switched to ${option.textContent}: your next message goes to it.`);
    // The budget follows the new model's window.
    await refreshGauge();
    if (currentJob && currentJob.status === "awaiting") renderJob(currentJob);
  }
  if (picker) picker.addEventListener("change", switchModel);

  /* ---------------- composer ---------------- */

  function autosize() {
    input.style.height = "auto";
    input.style.height = `${Math.min(input.scrollHeight, window.innerHeight * 0.4)}px`;
  }
  input.addEventListener("input", autosize);
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  let sending = false;
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    if (streaming || sending) return;
    const content = input.value;
    if (!content.trim()) { input.focus(); return; }
    // Guards the gap before the stream starts (creating the conversation) against a double send.
    sending = true;
    try {
      await sendMessage(content.replace(/\s+$/, ""));
    } finally {
      sending = false;
    }
  });

  /* ---------------- event delegation ---------------- */

  function closeMenus(except) {
    document.querySelectorAll(".menu:not([hidden])").forEach((menu) => {
      if (menu === except) return;
      menu.hidden = true;
      menu.previousElementSibling?.setAttribute("aria-expanded", "false");
    });
    if (gaugePop && gaugePop !== except && !gaugePop.hidden) {
      gaugePop.hidden = true;
      gaugeBtn.setAttribute("aria-expanded", "false");
    }
  }

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
        app.classList.toggle("sidebar-open", open);
        document.querySelector(".sidebar-toggle").setAttribute("aria-expanded", String(open));
        document.querySelector(".scrim").hidden = !open;
        if (open) setTimeout(() => document.getElementById("new-chat").focus(), 50);
        else if (window.matchMedia("(max-width: 760px)").matches) document.querySelector(".sidebar-toggle").focus();
        break;
      }
      case "copy-code": {
        const pre = target.closest(".code-block").querySelector("pre");
        const ok = await copyText(pre.innerText.replace(/\n$/, ""));
        const label = target.querySelector("span");
        label.textContent = ok ? "Copied" : "Copy failed";
        setTimeout(() => { label.textContent = "Copy"; }, 1500);
        break;
      }
      case "copy-message": {
        const ok = await copyText(article.querySelector(".msg-source").value);
        toast(ok ? "Copied to the clipboard." : "Could not copy.", ok ? "info" : "error", 1800);
        break;
      }
      case "message-menu": {
        const menu = target.nextElementSibling;
        const open = menu.hidden;
        closeMenus(menu);
        menu.hidden = !open;
        target.setAttribute("aria-expanded", String(open));
        if (open) menu.querySelector("button")?.focus();
        break;
      }
      case "toggle-pin":
        closeMenus();
        if (article && article.dataset.id) await togglePin(article);
        break;
      case "regenerate":
        if (article && article.dataset.id) await regenerate(article);
        break;
      case "retry":
        if (article) await retry(article);
        break;
      case "stop":
        await stop();
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
        await compactNow("");
        break;
      case "dismiss-job":
        if (currentJob) dismissedJobs.add(currentJob.id);
        jobBanner.hidden = true;
        watchedJobId = null;
        break;
      case "not-now":
        target.disabled = true;
        await dismissAwaiting();
        break;
      case "show-summary":
        if (currentJob && currentJob.summary_id && !revealSummary(currentJob.summary_id)) {
          window.location.href = `/c/${conversationId}/#m-${currentJob.summary_id}`;
        }
        break;
      case "jump-bottom":
        scrollToBottom(true);
        jumpBtn.hidden = true;
        break;
      case "reload":
        window.location.reload();
        break;
      case "rename-current": {
        const h1 = document.getElementById("chat-title");
        inlineRename(h1, h1.textContent, (title) => renameConversation(conversationId, title));
        break;
      }
      case "rename-conversation": {
        const item = target.closest(".conv-item");
        const titleEl = item.querySelector(".conv-link");
        inlineRename(titleEl, titleEl.textContent.trim(), (title) => renameConversation(item.dataset.id, title));
        break;
      }
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

  const titleEl = document.getElementById("chat-title");
  titleEl.addEventListener("dblclick", () => {
    if (conversationId) document.querySelector('[data-action="rename-current"]')?.click();
  });

  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape") {
      // Escape stops a streaming reply unless it is closing a menu or dialog first.
      const menuOpen = document.querySelector(".menu:not([hidden])") || (gaugePop && !gaugePop.hidden)
        || document.querySelector("dialog[open]") || document.querySelector(".conv-rename, .title-input");
      if (streaming && !menuOpen) stop();
      closeMenus();
      if (app.classList.contains("sidebar-open")) document.querySelector('[data-action="close-sidebar"]').click();
    }
  });

  /* ---------------- a reply streaming in another tab ---------------- */

  // A page opened while another tab (or device) streams a reply shows it as "Writing…": follow it
  // from the server until it ends, then show it as stored. Bounded, so a reply orphaned by a crashed
  // server process is not polled forever.
  const FOLLOW_EVERY_MS = 2000;
  const FOLLOW_FOR_MS = 15 * 60 * 1000;
  let followTimer = null;
  let followSince = 0;

  function streamingElsewhere() {
    const mine = streaming && streaming.assistantId ? Number(streaming.assistantId) : null;
    return [...messagesEl.querySelectorAll('.msg[data-status="streaming"][data-id]')]
      .filter((m) => Number(m.dataset.id) !== mine && !m.classList.contains("is-streaming"));
  }

  function followElsewhere() {
    if (followTimer || !conversationId) return;
    const pending = streamingElsewhere();
    if (!pending.length) return;
    if (!followSince) followSince = Date.now();
    if (Date.now() - followSince > FOLLOW_FOR_MS) return;
    followTimer = setTimeout(async () => {
      followTimer = null;
      const since = Math.min(...pending.map((m) => Number(m.dataset.id)));
      let res = null;
      try {
        res = await fetch(`/c/${conversationId}/messages/?since=${since}`, { credentials: "same-origin" });
      } catch (_) { /* offline for a moment: try again on the next round */ }
      if (res && res.ok) {
        const holder = document.createElement("div");
        holder.innerHTML = await res.text(); // server-rendered, sanitized fragment
        enhance(holder);
        const stick = nearBottom();
        for (const node of [...holder.children]) {
          const existing = node.id ? document.getElementById(node.id) : null;
          if (existing && existing.parentElement === messagesEl) existing.replaceWith(node);
          else if (!existing && node.id) messagesEl.append(node);
        }
        placeWindowMarker(lastGauge ? lastGauge.window_start_id : app.dataset.windowStart, lastGauge && lastGauge.strategy);
        if (!streamingElsewhere().length) refreshGauge();
        if (stick) scrollToBottom(true);
      }
      followElsewhere();
    }, FOLLOW_EVERY_MS);
  }

  /* ---------------- start ---------------- */

  enhance(messagesEl);
  const lastReply = messagesEl.querySelector(".msg:has([data-action='regenerate'])");
  if (lastReply) lastReply.classList.add("is-last");
  placeWindowMarker(app.dataset.windowStart, null);
  scrollToBottom(true);
  autosize();
  if (conversationId) {
    refreshGauge().then(() => refreshJobs());
    followElsewhere();
    revealHash();
    window.addEventListener("hashchange", revealHash);
  }
  if (window.matchMedia("(hover: hover)").matches) input.focus();
})();
