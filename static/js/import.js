/* Settings → Import and export: upload the file (POST /api/imports/), poll the job every second
   (GET /api/imports/<id>/) into a <progress> bar, then link the imported chats or say what went wrong.
   Uses the page's classic helpers (common.js: Longchat); the job is followed by import_follow.js. */

import { followImport } from "./import_follow.js";

const LINKS_SHOWN = 50;
const OMITTED_WORDS = {
  branch_messages: "on other branches",
  tool_messages: "from tools",
  tool_calls: "calls to tools",
  hidden_messages: "hidden by the source",
  empty_messages: "with no text",
};

const form = document.getElementById("import-form");
if (form) setUp(form);

function setUp(formEl) {
  const { csrfToken, errorText, tellTabs } = Longchat; // common.js (a classic script: a global binding, not a window property)
  const input = formEl.querySelector("#import-file");
  const button = formEl.querySelector("#import-start");
  const box = document.getElementById("import-status");
  const bar = document.getElementById("import-progress");
  const label = document.getElementById("import-progress-label");
  const message = document.getElementById("import-message");
  const links = document.getElementById("import-links");
  const maxBytes = Number(formEl.dataset.maxBytes) || Infinity;

  function say(text, kind = "") {
    message.textContent = text;
    message.className = `import-message${kind ? ` is-${kind}` : ""}`;
  }

  // Nothing was imported: the box's label and bar say so, not the page's "Importing…" nor the last import's figures.
  function refuse(text) {
    label.textContent = "Not imported";
    bar.value = 0;
    say(text, "fail");
  }

  function megabytes(bytes) {
    return `${(bytes / 1e6).toLocaleString(undefined, { maximumFractionDigits: 1 })} MB`;
  }

  formEl.addEventListener("submit", async (event) => {
    event.preventDefault();
    const file = input.files && input.files[0];
    box.hidden = false;
    links.replaceChildren();
    if (!file) { refuse("Choose a file to import first."); return; }
    if (file.size > maxBytes) {
      refuse(`The file is ${megabytes(file.size)}; the largest import is ${megabytes(maxBytes)}.`);
      return;
    }
    // Disabled while the file uploads and imports, the button drops the focus: given back after.
    const hadFocus = document.activeElement === button;
    button.disabled = true;
    try {
      await run(file);
    } finally {
      button.disabled = false;
      if (hadFocus && (!document.activeElement || document.activeElement === document.body)) button.focus();
    }
  });

  async function run(file) {
    bar.removeAttribute("value"); // indeterminate while the file uploads
    label.textContent = `Uploading ${file.name}…`;
    say("");
    const body = new FormData();
    body.append("file", file);
    let response;
    try {
      response = await fetch("/api/imports/", {
        method: "POST", body, credentials: "same-origin",
        headers: { "X-CSRFToken": csrfToken(), Accept: "application/json" },
      });
    } catch {
      say("Could not reach the server. Check your connection and try again.", "fail");
      return;
    }
    const data = await response.json().catch(() => null);
    if (!response.ok) {
      // The form has one field: its error is said without the field's name in front ("file: …").
      refuse(data && Array.isArray(data.file) ? data.file.join(" ") : errorText(data, response.status));
      return;
    }
    await follow(data.id);
  }

  async function follow(id) {
    const job = await followImport(id, {
      onJob: show,
      onTrouble(why, stopped) {
        if (stopped) label.textContent = "The import stopped";
        say(why, "fail");
      },
    });
    // The chats imported join the sidebars of the browser's other tabs (no api() call of this page told them).
    if (job && job.imported) tellTabs({ method: "POST", path: "/api/conversations/" });
  }

  function show(job) {
    if (job.total) {
      bar.max = job.total;
      bar.value = job.done;
    } else {
      bar.removeAttribute("value");
    }
    if (job.status === "queued") label.textContent = "Waiting for a worker…";
    else if (job.status === "running") {
      label.textContent = job.total
        ? `Importing ${job.format_label}: ${job.done.toLocaleString()} of ${job.total.toLocaleString()} conversations`
        : "Reading the file…";
    } else if (job.status === "done") {
      label.textContent = !job.imported && job.already_imported
        ? "Nothing new to import"
        : `Imported ${job.imported.toLocaleString()} conversation${job.imported === 1 ? "" : "s"}`;
    }
    else label.textContent = "The import stopped";
    if (job.status === "failed") say(job.error || "The import failed.", "fail");
    // Done with nothing imported (every conversation skipped) is no success: said as a failure. A file
    // whose chats were all imported before is no failure: they are here.
    else if (job.status === "done") say(summary(job), job.imported || job.already_imported ? "ok" : "fail");
    if (job.status === "done" || job.status === "failed") list(job.conversations || []);
  }

  function summary(job) {
    const parts = [`${job.imported.toLocaleString()} of ${job.total.toLocaleString()} conversations imported.`];
    if (job.already_imported) {
      const n = job.already_imported;
      parts.push(`${n.toLocaleString()} ${n === 1 ? "was" : "were"} imported before and ${n === 1 ? "is" : "are"} left as ${n === 1 ? "it is" : "they are"}.`);
    }
    if (job.skipped_count) {
      const reasons = job.skipped.slice(0, 3).map((s) => s.error).join(" · ");
      parts.push(`${job.skipped_count} skipped: ${reasons}${job.skipped_count > 3 ? " …" : ""}`);
    }
    const omitted = Object.entries(job.omitted || {}).filter(([, n]) => n > 0);
    if (omitted.length) {
      const what = omitted.map(([reason, n]) => `${n} ${OMITTED_WORDS[reason] || reason.replaceAll("_", " ")}`);
      parts.push(`Messages not imported: ${what.join(", ")}.`);
    }
    // Archived at their source (ChatGPT, Open WebUI, an export of ours), they came in archived: not
    // in the sidebar, where the links' "more in your chat list" would send the user looking.
    const archived = (job.conversations || []).filter((c) => c.archived).length;
    if (archived) {
      parts.push(archived === 1
        ? "1 came in archived: out of the sidebar, Settings → Archived chats lists it."
        : `${archived.toLocaleString()} came in archived: out of the sidebar, Settings → Archived chats lists them.`);
    }
    return parts.join(" ");
  }

  function list(conversations) {
    links.replaceChildren(...conversations.slice(0, LINKS_SHOWN).map((c) => {
      const item = document.createElement("li");
      const link = document.createElement("a");
      link.href = `/c/${c.id}/`;
      link.textContent = c.title;
      item.append(link);
      if (c.archived) {
        const tag = document.createElement("span");
        tag.className = "import-tag";
        tag.textContent = "Archived";
        item.append(" ", tag);
      }
      return item;
    }));
    if (conversations.length > LINKS_SHOWN) {
      const more = document.createElement("li");
      more.textContent = `… and ${(conversations.length - LINKS_SHOWN).toLocaleString()} more in your chat list.`;
      links.append(more);
    }
  }
}
