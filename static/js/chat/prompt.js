/* The chat header's menu: the conversation's system prompt (a dialog) and its export links. */
import { dialogSave } from "./dialog_save.js";
import { refreshGauge } from "./gauge.js";
import { api, errorText, state, toast } from "./state.js";

const dialog = document.getElementById("system-prompt-dialog");
const area = document.getElementById("system-prompt-text");
const errorBox = document.getElementById("system-prompt-error");

/** Point the export links at this chat: a new chat gets its id only when its first message is sent. */
export function pointExportLinks() {
  if (!state.conversationId) return;
  document.querySelectorAll("[data-export]").forEach((a) => {
    a.href = `/api/conversations/${state.conversationId}/export/?format=${a.dataset.export}`;
  });
}

function showError(text) {
  errorBox.textContent = text;
  errorBox.hidden = !text;
}

/** Open the dialog with the chat's current system prompt, read fresh (another tab may have changed it). */
export async function editSystemPrompt() {
  if (!state.conversationId || !dialog) return;
  const res = await api(`/api/conversations/${state.conversationId}/`);
  if (!res.ok || !res.data) { toast(errorText(res.data, res.status), "error"); return; }
  area.value = res.data.system_prompt || "";
  showError("");
  dialog.returnValue = "";
  dialog.showModal();
  area.focus();
}

// Save keeps the dialog open until the server accepted the text (a refusal: too long); Cancel and
// Escape close it as usual.
dialog?.querySelector("form").addEventListener("submit", async (e) => {
  if (!e.submitter || e.submitter.value !== "ok") return;
  e.preventDefault();
  const res = await dialogSave({
    dialog, save: e.submitter, url: `/api/conversations/${state.conversationId}/`, field: "system_prompt", area, showError,
  });
  if (!res) return;
  // The prompt is sent with every request: the gauge's figure changes with it, and says whether it fits.
  await refreshGauge();
  if (!(res.data && res.data.system_prompt)) toast("System prompt removed: it applies from your next message.");
  else if (state.lastGauge && state.lastGauge.prompt_shortened) {
    toast("System prompt saved, but it is too long for this model's budget: it is sent shortened (its beginning and end).",
      "error", 8000);
  } else toast("System prompt saved: it applies from your next message.");
});

// The menu item that opened the dialog is hidden by then: keyboard focus goes back to the menu's button.
dialog?.addEventListener("close", () => document.getElementById("conv-menu-btn")?.focus());
