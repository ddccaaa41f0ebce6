/* A saved prompt's variables, filled in when the "/" menu puts it in the message box. The names are
 * Open WebUI's, so that prompts imported from it (Settings → Prompts → Import) work as they did there:
 * {{CURRENT_DATE}} (2026-11-30), {{CURRENT_TIME}} (14:05:09), {{CURRENT_DATETIME}}, {{CURRENT_WEEKDAY}},
 * {{CURRENT_TIMEZONE}}, {{USER_NAME}}, {{USER_LANGUAGE}}, and {{CLIPBOARD}} (the clipboard's text, when
 * the browser lets the page read it). Any other {{…}} is a blank for the user to fill in: it is left as
 * written, and the first one left is selected, so that what is typed replaces it. */

const VARIABLE = /\{\{\s*([A-Za-z_][\w ]*?)\s*(?:\|[^{}]*)?\}\}/g;

function pad(n) {
  return String(n).padStart(2, "0");
}

/** The values known without asking anything, by name, at `now` in the browser's own time zone. */
function known(now, userName) {
  const date = `${now.getFullYear()}-${pad(now.getMonth() + 1)}-${pad(now.getDate())}`;
  const time = `${pad(now.getHours())}:${pad(now.getMinutes())}:${pad(now.getSeconds())}`;
  return {
    CURRENT_DATE: date,
    CURRENT_TIME: time,
    CURRENT_DATETIME: `${date} ${time}`,
    CURRENT_WEEKDAY: now.toLocaleDateString("en-US", { weekday: "long" }),
    CURRENT_TIMEZONE: Intl.DateTimeFormat().resolvedOptions().timeZone || "",
    USER_NAME: userName,
    USER_LANGUAGE: navigator.language || "",
  };
}

/** The clipboard's text, or null when the browser does not let the page read it (no permission, an
 *  insecure origin, a browser without the API). */
async function clipboardText() {
  try {
    return navigator.clipboard?.readText ? await navigator.clipboard.readText() : null;
  } catch {
    return null;
  }
}

/** `text` with its variables filled in: {text, blank} where `blank` is [start, end] of the first {{…}}
 *  left (one to fill in, or {{CLIPBOARD}} when it could not be read), or null. */
export async function promptFilled(text, { userName = "", now = new Date() } = {}) {
  const values = known(now, userName);
  if ([...text.matchAll(VARIABLE)].some((m) => m[1] === "CLIPBOARD")) {
    const clip = await clipboardText();
    if (clip !== null) values.CLIPBOARD = clip;
  }
  // One pass over the prompt's own text: a value holding "{{…}}" (a clipboard of template text) goes in
  // as it reads, and is neither filled nor taken for a blank.
  let filled = "";
  let last = 0;
  let blank = null;
  for (const m of text.matchAll(VARIABLE)) {
    filled += text.slice(last, m.index);
    if (Object.hasOwn(values, m[1])) {
      filled += values[m[1]];
    } else {
      blank ??= [filled.length, filled.length + m[0].length];
      filled += m[0];
    }
    last = m.index + m[0].length;
  }
  return { text: filled + text.slice(last), blank };
}
