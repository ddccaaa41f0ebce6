/* Images to send with the next message: a thumbnail strip above the box, each with a Remove button.
 *
 * attach.js hands over the image files of a pick, a drop or a paste (PNG, JPEG, WebP, GIF); they are
 * read as data: URLs, shown, and sent with the message (composer.js), base64 in its JSON. The server
 * checks each one's type by its bytes and its size again: the checks here only spare a useless upload.
 * A model that cannot see images (its config, or the registry) is sent a placeholder: the strip says so. */
import { announce, el } from "./dom.js";
import { app, input, picker } from "./state.js";

export const IMAGE_TYPES = ["image/png", "image/jpeg", "image/webp", "image/gif"];
const maxBytes = Number(app.dataset.maxImageBytes || 0);
const maxImages = Number(app.dataset.maxImages || 0);
const strip = document.getElementById("attach-strip");
const list = document.getElementById("attach-list");
const note = document.getElementById("attach-note");

let pending = []; // {name, url, width, height}

export const isImage = (file) => IMAGE_TYPES.includes(file.type);

function megabytes(size) {
  return `${(size / 1e6).toLocaleString(undefined, { maximumFractionDigits: 1 })} MB`;
}

function readUrl(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(file);
  });
}

function size(url) {
  return new Promise((resolve) => {
    const img = new Image();
    img.onload = () => resolve({ width: img.naturalWidth, height: img.naturalHeight });
    img.onerror = () => resolve(null); // not an image the browser can draw: refused
    img.src = url;
  });
}

/** Whether the model picked in the header is sent images (its option says, from the server). */
export function modelSeesImages() {
  const option = picker && picker.selectedOptions[0];
  return Boolean(option && option.dataset.images === "1");
}

function label(image) {
  return `${image.name || "Pasted image"} (${image.width}x${image.height})`;
}

function draw() {
  list.replaceChildren(...pending.map((image, index) => {
    const item = el("li", "attach-thumb");
    const img = el("img");
    img.src = image.url;
    img.alt = label(image);
    const remove = el("button", "icon-btn icon-btn--sm attach-remove", "×");
    remove.type = "button";
    remove.setAttribute("aria-label", `Remove ${label(image)}`);
    remove.addEventListener("click", () => {
      const [gone] = pending.splice(index, 1);
      draw();
      announce(`Removed ${label(gone)}.`);
      // The focus stays in the strip (the next Remove) or goes back to the box.
      (list.querySelectorAll(".attach-remove")[Math.min(index, pending.length - 1)] || input).focus();
    });
    item.append(img, remove);
    return item;
  }));
  strip.hidden = pending.length === 0;
  note.hidden = pending.length === 0 || modelSeesImages();
}

/** Add image `files`; the reason for the first one refused (the others are added), or null. */
export async function addImages(files) {
  let refused = null;
  const added = [];
  for (const file of files) {
    const name = file.name && file.name !== "image.png" ? file.name : "";
    if (pending.length >= maxImages) {
      refused = `A message may carry at most ${maxImages} images.`;
      break;
    }
    if (maxBytes && file.size > maxBytes) {
      refused ||= `${file.name} is ${megabytes(file.size)}; an image may be at most ${megabytes(maxBytes)}.`;
      continue;
    }
    const url = await readUrl(file);
    const dims = await size(url);
    if (!dims) {
      refused ||= `${file.name} is not an image this chat can send.`;
      continue;
    }
    const image = { name, url, ...dims };
    pending.push(image);
    added.push(label(image));
  }
  draw();
  if (added.length) announce(`Attached ${added.join(", ")}: sent with your message.`);
  return refused;
}

export const hasImages = () => pending.length > 0;

/** The pending images, taken out of the strip: {payload for the API, shown for the bubble}. */
export function takeImages() {
  const taken = pending;
  pending = [];
  draw();
  return taken;
}

/** Images of a send the server refused: back in the strip, ahead of any added since. */
export function restoreImages(images) {
  pending = [...images, ...pending].slice(0, Math.max(maxImages, images.length));
  draw();
}

export const imagesPayload = (images) => images.map((image) => ({ data: image.url, name: image.name }));

/** Thumbnails in a message bubble (`images`: {url, name, width, height}); each opens full size. */
export function imagesRow(images) {
  const row = el("div", "msg-images");
  for (const image of images) {
    const link = el("a", "msg-image");
    link.href = image.url;
    link.target = "_blank";
    link.rel = "noopener";
    link.title = `Open full size (${image.width}x${image.height})`;
    const img = el("img");
    img.src = image.url;
    img.alt = label(image);
    img.width = image.width;
    img.height = image.height;
    link.append(img);
    row.append(link);
  }
  return row;
}

if (picker) picker.addEventListener("change", draw);

/** The sent message's images as stored (`stored`: the API's shape): each link then opens the stored
 *  file (a browser opens no data: URL as a page); the thumbnail keeps what it drew. */
export function imagesStored(article, stored) {
  const links = article.querySelectorAll(".msg-image");
  (stored || []).forEach((image, k) => { if (links[k]) links[k].href = image.url; });
}
