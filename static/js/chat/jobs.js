/* Background summaries: the job banner, polling while one runs, "compact now?". */
import { announce, bannerButton, el, icon, stateChip } from "./dom.js";
import { gaugePercents, refreshGauge } from "./gauge.js";
import { api, errorText, jobBanner, pageLoadedAt, state, toast } from "./state.js";
import { showSummary } from "./summaries.js";

let jobPoll = null;

export const ACTIVE_JOB = ["pending", "queued", "running"];

export const POLL_FIRST_MS = 1000;

export const POLL_MAX_MS = 15000;

// How long a job may stay pending (created, its message not yet published) before the banner says
// the queue is unreachable.
const PENDING_GRACE_MS = 5000;

// How long a job may wait queued, not retrying, before the banner says no worker has taken it: with
// none running (`serve --no-worker`, uvicorn alone) it read "Summary queued" for as long as it stayed.
// A job asked about ("compact now?") keeps the date it was made, maybe long before it was queued: so
// it must also have been seen queued by this page for a few seconds, which a running worker never lets it.
const QUEUED_GRACE_MS = 60000;
const QUEUED_SEEN_MS = 5000;
const queuedSeen = new Map();

let pollDelay = POLL_FIRST_MS;

let jobsSeq = 0;

// A turn that asked for a summary job: the job is created a moment after the reply ends, in the
// background, so the list is read again (backing off) until a job newer than any seen shows, a few
// times at most: the request may also find nothing to do ("Not now" holds, one already runs).
const EXPECT_NEW_READS = 4;

let expectNewReads = 0;

let newestJobId = 0;

export const DONE_BANNER_MS = 8000;

let doneBannerTimer = null;

export const dismissedJobs = new Set(); // finished jobs whose banner was closed: not shown again on this page

export function jobDuration(job) {
  if (job.duration_ms !== null && job.duration_ms !== undefined) return job.duration_ms / 1000;
  if (job.started_at && job.finished_at) return (Date.parse(job.finished_at) - Date.parse(job.started_at)) / 1000;
  return null;
}

export function formatSeconds(secs) {
  if (secs < 0.05) return "under 0.1 s";
  if (secs < 10) return `${secs.toFixed(1)} s`;
  if (secs < 90) return `${Math.round(secs)} s`;
  return `${Math.floor(secs / 60)} min ${Math.round(secs % 60)} s`;
}

export function renderJob(job) {
  // A button of the banner may hold focus ("Compact now"): it comes back to the banner's new first
  // button, or to the message box, instead of falling to the page.
  const hadFocus = jobBanner.contains(document.activeElement);
  // Drawn apart, and put in place only where it reads otherwise: the banner is a live region, and a
  // redraw had a screen reader say it again at every look the page takes at a running job.
  const draft = jobBanner.cloneNode(false);
  drawJob(job, draft);
  for (const { name } of [...jobBanner.attributes]) if (!draft.hasAttribute(name)) jobBanner.removeAttribute(name);
  for (const { name, value } of [...draft.attributes]) if (jobBanner.getAttribute(name) !== value) jobBanner.setAttribute(name, value);
  if (jobBanner.innerHTML !== draft.innerHTML) jobBanner.replaceChildren(...draft.childNodes);
  if (hadFocus && !jobBanner.contains(document.activeElement)) {
    const next = jobBanner.hidden ? null : jobBanner.querySelector(".job-actions button");
    (next || document.getElementById("composer-input"))?.focus();
  }
}

function drawJob(job, banner) {
  state.currentJob = job;
  clearTimeout(doneBannerTimer);
  banner.replaceChildren();
  banner.className = "job-banner";
  if (!job) { banner.hidden = true; delete banner.dataset.status; return; }
  const status = job.status;
  // Finished jobs are news only if this page saw them run, or they ended moments before it loaded,
  // and only until closed (by hand, or on its own for a success).
  const finishedAt = job.finished_at ? Date.parse(job.finished_at) : 0;
  const fresh = !dismissedJobs.has(job.id) && (job.id === state.watchedJobId || finishedAt > pageLoadedAt - 60000);
  const text = el("span", "job-text");
  const actions = el("span", "job-actions");
  if (ACTIVE_JOB.includes(status)) {
    banner.classList.add("is-active");
    banner.append(el("span", "spinner"));
    // Every job is pending from its creation until its message is published, a moment later: only
    // one still pending after a few seconds says the queue is unreachable.
    const stuck = status === "pending" && Date.now() - Date.parse(job.created_at) > PENDING_GRACE_MS;
    if (status === "queued" && !queuedSeen.has(job.id)) queuedSeen.set(job.id, Date.now());
    const unclaimed = status === "queued" && !job.error && Date.now() - Date.parse(job.created_at) > QUEUED_GRACE_MS
      && Date.now() - queuedSeen.get(job.id) > QUEUED_SEEN_MS;
    const label = { pending: stuck ? "Pending" : "Queued", queued: "Queued", running: "Running" }[status];
    text.append(stateChip(label), document.createTextNode(
      status === "running" ? "Summarizing earlier messages in the background…"
        : stuck ? "The job queue is unreachable; the summary starts as soon as it is back."
          : unclaimed ? "No worker has taken it yet — the chat keeps working meanwhile."
            : "Summary queued — the chat keeps working meanwhile."));
    if (unclaimed) text.append(el("span", "job-note", "Summaries are written by a Celery worker: manage.py serve starts one (not with --no-worker)."));
    if (job.instructions) text.append(el("span", "job-note", `Instructions: “${job.instructions}”`));
    // Queued again after a failed attempt: why it waits (the worker's note, with the wait; a running
    // job may still hold the note of the attempt before, no longer news).
    if (status === "queued" && job.error) text.append(el("span", "job-note", job.error));
  } else if (status === "awaiting") {
    banner.classList.add("is-ask");
    banner.append(icon("compress"));
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
    banner.classList.add("is-done");
    banner.append(icon("check"));
    const secs = jobDuration(job);
    // What it covers left the path while it was written (an edit or a switch): it went with that version.
    const used = job.summary_on_active_path === false
      ? "for the version you left meanwhile (an edit or a version switch): the model uses it there, not here"
      : "the model uses it from your next message";
    text.append(stateChip("Done"), document.createTextNode(
      `Summary ready${secs !== null ? ` in ${formatSeconds(secs)}` : ""}${job.extractive ? " (extractive)" : ""} — ${used}.`));
    // A done job with a note: the model kept failing and the extractive summarizer wrote it. Said,
    // or a summary model that is down goes unnoticed.
    if (job.error) text.append(el("span", "job-note", job.error));
    if (job.summary_id && job.summary_on_active_path !== false) actions.append(bannerButton("Show it", "show-summary", "btn btn--sm btn--ghost"));
  } else if (status === "failed" && fresh) {
    banner.classList.add("is-failed");
    banner.append(icon("alert"));
    // The worker's reasons are sentences already ("… Check the key in Settings."): no second full stop.
    const reason = job.error || "unknown reason";
    text.append(stateChip("Failed"), document.createTextNode(`Summary failed: ${reason}${/[.!?]$/.test(reason) ? "" : "."} `));
    // A reason given with an extractive summary says that it was written (summary_runner): not twice.
    const left = job.summary_on_active_path === false; // as for a done job: it went with the version left
    if (!job.summary_id || !job.error || left) {
      text.append(el("span", "job-note", left ? "Its extractive summary went with the version you left meanwhile."
        : job.summary_id ? "An extractive summary stands in meanwhile."
          : "The chat falls back to truncation; nothing is lost."));
    }
    if (job.summary_id && !left) actions.append(bannerButton("Show it", "show-summary", "btn btn--sm btn--ghost"));
  } else if (status === "cancelled" && job.id === state.watchedJobId) {
    banner.classList.add("is-muted");
    banner.append(icon("compress"));
    text.append(stateChip("Cancelled"), document.createTextNode(job.error || "Nothing to summarize yet."));
  } else {
    banner.hidden = true;
    delete banner.dataset.status;
    return;
  }
  banner.dataset.status = status;
  banner.dataset.jobId = String(job.id);
  banner.append(text);
  if (!["awaiting", ...ACTIVE_JOB].includes(status)) {
    const close = el("button", "icon-btn icon-btn--sm");
    close.type = "button";
    close.dataset.action = "dismiss-job";
    close.setAttribute("aria-label", "Close");
    close.title = "Close";
    close.append(icon("close"));
    actions.append(close);
  }
  if (actions.childNodes.length) banner.append(actions);
  banner.hidden = false;
  // Good news needs no answer: "Summary ready" leaves by itself, unless the pointer or focus is on it.
  if (status === "done") doneBannerTimer = setTimeout(() => dismissDone(job.id), DONE_BANNER_MS);
}

export function dismissDone(jobId) {
  if (jobBanner.dataset.jobId !== String(jobId) || jobBanner.dataset.status !== "done") return;
  if (jobBanner.matches(":hover, :focus-within")) {
    doneBannerTimer = setTimeout(() => dismissDone(jobId), 2000);
    return;
  }
  dismissedJobs.add(jobId);
  jobBanner.hidden = true;
  state.watchedJobId = null;
}

/** Polls the job list while a job is active, backing off (1 s → 15 s); stops when nothing runs. */
export async function refreshJobs({ restart = false, expectNew = false } = {}) {
  if (!state.conversationId || !state.summaryApi) return;
  if (restart) pollDelay = POLL_FIRST_MS;
  if (expectNew) expectNewReads = EXPECT_NEW_READS;
  clearTimeout(jobPoll);
  jobPoll = null;
  const seq = ++jobsSeq;
  const res = await api(`/api/conversations/${state.conversationId}/summary-jobs/?limit=1`);
  if (seq !== jobsSeq) return; // a newer refresh is under way
  if (res.status === 404) { state.summaryApi = false; return; }
  if (!res.ok || !res.data) {
    // A failed poll (server restarting, network blip) is retried later, never given up silently.
    if (state.watchedJobId || expectNewReads > 0) jobPoll = setTimeout(refreshJobs, pollDelay);
    pollDelay = Math.min(pollDelay * 2, POLL_MAX_MS);
    return;
  }
  const jobs = Array.isArray(res.data) ? res.data : res.data.results || [];
  const job = jobs.length ? jobs.reduce((a, b) => (Number(b.id) > Number(a.id) ? b : a)) : null;
  if (job && Number(job.id) > newestJobId) {
    newestJobId = Number(job.id);
    expectNewReads = 0;
  } else if (expectNewReads > 0) {
    expectNewReads -= 1;
  }
  const finished = job && !ACTIVE_JOB.includes(job.status) && !shownJobs.has(job.id)
    && (job.id === state.watchedJobId || unseenSummary(job));
  if (finished) shownJobs.add(job.id);
  if (job && ACTIVE_JOB.includes(job.status)) state.watchedJobId = job.id;
  renderJob(job);
  if ((job && ACTIVE_JOB.includes(job.status)) || expectNewReads > 0) {
    jobPoll = setTimeout(refreshJobs, pollDelay);
    pollDelay = Math.min(Math.round(pollDelay * 1.6), POLL_MAX_MS);
  } else {
    pollDelay = POLL_FIRST_MS;
  }
  if (finished) await jobFinished(job);
}

const shownJobs = new Set(); // ended jobs whose summary and gauge this page has shown

// An automatic job may start and end between two polls: its summary, written since the page
// loaded, is not on the page yet (one the server rendered is).
function unseenSummary(job) {
  const finishedAt = job.finished_at ? Date.parse(job.finished_at) : 0;
  return Boolean(job.summary_id) && finishedAt > pageLoadedAt - 60000 && !document.getElementById(`m-${job.summary_id}`);
}

/** A job this page watched has ended: show its summary and the new gauge without reloading. */
export async function jobFinished(job) {
  const left = job.summary_on_active_path === false; // not on the path shown: no marker of it here
  if (job.summary_id && !left) {
    const res = await api(`/api/summaries/${job.summary_id}/`);
    if (res.ok && res.data) showSummary(res.data);
  }
  await refreshGauge();
  if (job.status === "done") announce(left ? "The summary was written for the version you left." : "The summary is ready.");
  else if (job.status === "failed") announce(`The summary failed: ${job.error || ""}`);
}

/** Ask for a compaction now; false when it was refused (the caller may give the text back). */
export async function compactNow(instructions) {
  if (!state.conversationId) { toast("Start a chat first: there is nothing to compact yet."); return false; }
  const res = await api(`/api/conversations/${state.conversationId}/compact/`, { method: "POST", body: { instructions } });
  // A 404 is the chat, deleted in another tab or device: errorText says so.
  if (!res.ok) { toast(errorText(res.data, res.status), "error", 6000); return false; }
  // The status line below says what happens next; no toast on top of it.
  announce(instructions ? "Compacting with your instructions." : "Compacting earlier messages.");
  state.summaryApi = true;
  if (res.data && res.data.id) {
    state.watchedJobId = res.data.id;
    renderJob(res.data);
  }
  refreshJobs({ restart: true });
  return true;
}

export async function dismissAwaiting() {
  const jobId = jobBanner.dataset.jobId;
  if (!state.conversationId || !jobId) return;
  const res = await api(`/api/conversations/${state.conversationId}/summary-jobs/${jobId}/dismiss/`, { method: "POST" });
  if (!res.ok) {
    // It started meanwhile (another tab said yes): show what it is doing instead.
    toast(errorText(res.data, res.status), "error", 5000);
    refreshJobs({ restart: true });
    return;
  }
  renderJob(null);
  toast("Not now: older turns keep being truncated, and this is not asked again until the history grows by another 10% of the budget. Compact any time with /compact or from the gauge.", "info", 6000);
}
