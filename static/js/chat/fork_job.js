/* Branch in new chat past the request's limits (fork_services.MAX_FORK_MESSAGES, MAX_FORK_IMAGE_BYTES): the server
 * answers 202 with the import job that writes the new chat in the background. A note under the message branched
 * from says so and follows the job (import_follow.js, as the settings page follows an upload), then
 * opens the new chat, or, when this page holds something unsent, links it; or says why it failed. */
import { followImport } from "../import_follow.js";
import { el, icon } from "./dom.js";
import { input, state } from "./state.js";

function noteFor(article) {
  article.querySelector(".msg-fork")?.remove();
  const note = el("div", "msg-fork");
  note.setAttribute("role", "status");
  note.append(icon("fork"), el("span", "msg-fork-text"));
  note.dataset.messageId = article.id;
  place(note);
  return note;
}

/** Under its message, found by id: a catch-up may draw the message anew while the job runs. */
function place(note) {
  const article = document.getElementById(note.dataset.messageId);
  if (!article || article.contains(note)) return;
  article.querySelector(".msg-fork")?.remove();
  article.querySelector(".msg-body").insertBefore(note, article.querySelector(".msg-actions"));
}

function say(note, text, failed = false) {
  place(note);
  note.classList.toggle("is-failed", failed);
  note.querySelector(".msg-fork-text").textContent = text;
}

/** Follow the branch job `job` (ForkJobOutputSerializer) in a note under `article`. */
export async function followFork(article, job) {
  const note = noteFor(article);
  const copying = `Copying ${job.messages.toLocaleString()} messages into a new chat…`;
  say(note, `${copying} This runs in the background: you can go on meanwhile.`);
  const ended = await followImport(job.id, {
    onJob(current) {
      if (current.status === "queued") say(note, `${copying} Waiting for a worker.`);
      else if (current.status === "running") say(note, copying);
    },
    onTrouble(why, stopped) { say(note, stopped ? why : `${copying} ${why}`, stopped); },
  });
  if (!ended) return;
  const made = ended.status === "done" ? (ended.conversations || [])[0] : null;
  if (!made) {
    // A path the import's checks refused is skipped with its reason; a job failed whole says its error.
    const why = ended.error || ended.skipped?.[0]?.error || "The new chat could not be written.";
    say(note, `The new chat could not be made: ${why}`, true);
    note.setAttribute("role", "alert");
    return;
  }
  const href = `/c/${made.id}/`;
  // Opened as a short branch opens, unless that would drop what this page is doing (a reply being
  // written, a message typed meanwhile, an edit open): then a link waits for the user.
  if (!state.streaming && !input.value.trim() && !document.querySelector(".msg-edit")) {
    window.location.href = href;
    return;
  }
  say(note, "The new chat is ready: ");
  const link = el("a", "", made.title);
  link.href = href;
  note.querySelector(".msg-fork-text").append(link);
}
