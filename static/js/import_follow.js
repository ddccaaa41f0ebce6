/* Follow an import job (GET /api/imports/<id>/) until it ends: the settings page's upload (import.js)
   and a chat's Branch in new chat past the request's limit, whose job the import worker writes
   (chat/fork_job.js). Uses the page's classic helpers (common.js: Longchat). */

export const POLL_MS = 1000;

const ENDED = ["done", "failed"];

/** Read job `id` every POLL_MS, handing each state to `onJob`, until it has ended: resolves to the
 *  ended job, or to null when asking again cannot help (the job gone, or the user signed out).
 *  `onTrouble(words, stopped)` says what went wrong with a read; a passing one is tried again. */
export async function followImport(id, { onJob, onTrouble }) {
  const { api, errorText } = Longchat; // common.js (a classic script: a global binding, not a window property)
  for (;;) {
    let res = null;
    try {
      res = await api(`/api/imports/${id}/`);
    } catch { /* offline for a moment: the next round tries again */ }
    if (!res || !res.ok) {
      const why = res ? errorText(res.data, res.status) : "Could not reach the server.";
      // Gone (404) or signed out (401/403) does not come back by asking again: say so and stop.
      if (res && [401, 403, 404].includes(res.status)) { onTrouble(why, true); return null; }
      onTrouble(`${why} Retrying…`, false);
      await sleep(POLL_MS * 3);
      continue;
    }
    onJob(res.data);
    if (ENDED.includes(res.data.status)) return res.data;
    await sleep(POLL_MS);
  }
}

function sleep(ms) {
  return new Promise((resolve) => { setTimeout(resolve, ms); });
}
