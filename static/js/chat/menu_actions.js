/* What the header's and a folder's ⋯ menus share with the dialogs their items open (folders.js,
 * folder_move.js, share.js): an item's menu closed, focus back on the chat menu's button when a dialog
 * closes, and the page's clicks on [data-action] elements sent to a module's own table of actions. */

/** Hide the menu `item` stands in, its button told so (aria-expanded). */
export function closeMenuOf(item) {
  const menu = item.closest(".menu");
  if (!menu) return;
  menu.hidden = true;
  menu.previousElementSibling?.setAttribute("aria-expanded", "false");
}

/** The menu item that opened `dialog` is hidden by then: focus goes back to the chat menu's button. */
export function refocusMenuButtonOnClose(dialog) {
  dialog?.addEventListener("close", () => document.getElementById("conv-menu-btn")?.focus());
}

/** A click on an element whose data-action names one of `actions` calls it with that element. */
export function handleActions(actions) {
  document.addEventListener("click", (e) => {
    const target = e.target.closest("[data-action]");
    const action = target && actions[target.dataset.action];
    if (action) action(target);
  });
}
