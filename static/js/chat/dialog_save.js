/* Save in a dialog that edits one text (the system prompt, a summary): the dialog stays open until the
   server took the text, so a refusal is shown beside it and nothing typed is lost. */
import { api, errorText } from "./state.js";

/** PATCH `{[field]: area.value}` to `url` from the Save button `save` of `dialog`. Refused: the field's
 * own errors (else what the status says) go to `showError`, the focus back to `area`, and null is
 * returned with the dialog open; taken: the dialog closes ("ok") and the response is returned. */
export async function dialogSave({ dialog, save, url, field, area, showError }) {
  save.disabled = true;
  const res = await api(url, { method: "PATCH", body: { [field]: area.value } });
  save.disabled = false;
  if (!res.ok) {
    const fieldErrors = res.data && res.data[field];
    showError(Array.isArray(fieldErrors) ? fieldErrors.join(" ") : errorText(res.data, res.status));
    area.focus();
    return null;
  }
  dialog.close("ok");
  return res;
}
