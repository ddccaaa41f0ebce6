/* Settings page: test a model config, look up a model's context window, confirm deletes. */
"use strict";

(() => {
  const { api, errorText, confirmAction } = Longchat;

  /* Test connection: report the endpoint's answer in plain words. */
  document.addEventListener("click", async (e) => {
    const btn = e.target.closest('[data-action="test-config"]');
    if (!btn) return;
    const id = btn.dataset.id;
    const out = document.getElementById(`test-result-${id}`);
    out.hidden = false;
    out.className = "test-result is-pending";
    out.textContent = "Testing the connection…";
    // Disabled while it runs, the button drops the focus: given back when it is enabled again.
    const hadFocus = document.activeElement === btn;
    btn.disabled = true;
    const res = await api(`/api/configs/${id}/test/`, { method: "POST", body: {} });
    btn.disabled = false;
    if (hadFocus && (!document.activeElement || document.activeElement === document.body)) btn.focus();
    const data = res.data || {};
    const ok = res.ok && data.ok !== false;
    // A refusal of the request itself (the config deleted in another tab, the test throttled) in errorText's words.
    const text = data.message || (ok ? "The endpoint answered." : errorText(data, res.status));
    out.className = `test-result ${ok ? "is-ok" : "is-fail"}`;
    // The server's sentence says what happened ("Connected to …", "… failed: …"): only the mark is added.
    // The test reads the stored config: edits typed in its form and not saved were not what it tried.
    const unsaved = unsavedEdits(btn.closest(".config-card"));
    out.textContent = `${ok ? "✓" : "✗"} ${text}${unsaved ? " (This tested the saved settings: press Save changes to test the ones typed.)" : ""}`;
  });

  /** Whether a model's edit form holds changes not saved yet. */
  function unsavedEdits(card) {
    const fields = card ? card.querySelectorAll(".config-edit form input:not([type=hidden])") : [];
    return [...fields].some((f) => (f.type === "checkbox" ? f.checked !== f.defaultChecked : f.value !== f.defaultValue));
  }

  /* A new API token is shown once: Copy puts it on the clipboard. */
  document.addEventListener("click", async (e) => {
    const btn = e.target.closest('[data-action="copy-api-token"]');
    if (!btn) return;
    const ok = await Longchat.copyText(document.getElementById("api-token-key").textContent.trim());
    const label = btn.querySelector("span");
    label.textContent = ok ? "Copied" : "Copy failed";
    setTimeout(() => { label.textContent = "Copy"; }, 1500);
  });

  /* A refused form comes back with its errors: focus its first wrong field (the page opens at its
     section; the error would otherwise be said to nobody), or its reason when no field was wrong ("You
     hold 200 prompts"). A new API token is focused the same way. */
  const wrong = document.querySelector(
    ".field.has-error input, .field.has-error textarea, .field.has-error select, .api-token-new")
    || document.querySelector(".form-errors");
  if (wrong) {
    if (!wrong.matches("input, textarea, select")) wrong.tabIndex = -1;
    // After load: going to the URL's #section focuses the page's viewport, which would undo this.
    window.addEventListener("load", () => setTimeout(() => {
      wrong.scrollIntoView({ block: "center" });
      wrong.focus({ preventScroll: true });
    }, 0));
  }

  /* Deletes, revokes and a token's replacement ask first. */
  document.querySelectorAll("form[data-confirm]").forEach((formEl) => {
    formEl.addEventListener("submit", async (e) => {
      if (formEl.dataset.confirmed === "1") return;
      e.preventDefault();
      // The dialog's button says what the form does ("Revoke", "Delete").
      if (await confirmAction(formEl.dataset.confirm, formEl.dataset.confirmLabel || "Delete")) {
        formEl.dataset.confirmed = "1";
        formEl.requestSubmit();
      }
    });
  });

  /* Context window: show what the model registry knows for the typed model name. */
  document.querySelectorAll("form[data-model-info]").forEach((formEl) => {
    const model = formEl.querySelector('input[name$="model"]');
    // The endpoint's host can say whose entry the name is (api.mistral.ai: "mistral/…").
    const baseUrl = formEl.querySelector('input[name$="base_url"]');
    const windowInput = formEl.querySelector('input[name$="context_window"]');
    const note = formEl.querySelector(".window-source");
    if (!model || !windowInput || !note) return;
    const original = note.textContent;
    let timer = null;
    let seq = 0;

    async function lookup() {
      const name = model.value.trim();
      if (!name) { note.textContent = original; windowInput.placeholder = ""; return; }
      const mine = ++seq;
      const where = baseUrl && baseUrl.value.trim() ? `&base_url=${encodeURIComponent(baseUrl.value.trim())}` : "";
      const res = await api(`/api/configs/model-info/?model=${encodeURIComponent(name)}${where}`);
      if (mine !== seq) return;
      const data = res.data || {};
      const size = data.context_window;
      const origin = data.context_window_source || data.source;
      if (res.ok && size && origin === "registry") {
        windowInput.placeholder = String(size);
        const source = "from the model registry";
        note.textContent = windowInput.value
          ? `Your value overrides the known ${Number(size).toLocaleString()} tokens (${source}). Clear it to use the known window.`
          : `Auto: ${Number(size).toLocaleString()} tokens — ${source}. Type a number to override.`;
      } else {
        windowInput.placeholder = size ? String(size) : "";
        note.textContent = windowInput.value
          ? "Set by you."
          : `This model is not in the registry: enter its context window${size ? `, or the default of ${Number(size).toLocaleString()} tokens is used` : ""}.`;
      }
      // An Ollama server's window is its own setting, not the model's: said where to find it.
      if (res.ok && data.context_window_note) note.textContent += ` ${data.context_window_note}`;
    }

    model.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(lookup, 300); });
    if (baseUrl) baseUrl.addEventListener("change", () => { clearTimeout(timer); timer = setTimeout(lookup, 150); });
    windowInput.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(lookup, 150); });
    if (model.value.trim() && !formEl.closest(".config-edit")) lookup();
  });
})();
