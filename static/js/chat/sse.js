/* One Server-Sent Events block (the lines up to a blank line) as {name, data}; null when it carries
 * no data or its data is not JSON (a keep-alive comment, a cut-off block). */
export function parseEvent(raw) {
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
