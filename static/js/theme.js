/* The colour theme, set before first paint (a classic script in <head>, after the stylesheets: the
   CSP allows no inline script). The theme is the one chosen (localStorage "theme"), else the OS's
   prefers-color-scheme, followed live: the dark stylesheet's media follows it ("all", "not all", or
   the OS's query), and <html data-theme> says "light" or "dark" for the rest of the CSS. A
   <select data-theme-select> on any page picks System / Light / Dark. */
"use strict";

(() => {
  const root = document.documentElement;
  const CHOICES = ["system", "light", "dark"];
  const OS_DARK = "(prefers-color-scheme: dark)";
  const os = window.matchMedia(OS_DARK);
  const darkSheet = document.getElementById("theme-dark");
  const MEDIA = { system: OS_DARK, light: "not all", dark: "all" };
  let unsaved = null; // the choice made on this page when storage is blocked

  function chosen() {
    if (unsaved !== null) return unsaved;
    try {
      const value = localStorage.getItem("theme");
      return CHOICES.includes(value) ? value : "system";
    } catch (_) {
      return "system"; // storage blocked: follow the OS
    }
  }

  function apply() {
    const choice = chosen();
    root.dataset.theme = choice === "system" ? (os.matches ? "dark" : "light") : choice;
    root.dataset.themeChoice = choice;
    if (darkSheet) darkSheet.media = MEDIA[choice];
    for (const select of document.querySelectorAll("select[data-theme-select]")) select.value = choice;
  }

  function choose(choice) {
    if (!CHOICES.includes(choice)) return;
    try {
      if (choice === "system") localStorage.removeItem("theme");
      else localStorage.setItem("theme", choice);
    } catch (_) {
      unsaved = choice; // not kept, but applied to this page
    }
    apply();
  }

  apply();
  os.addEventListener("change", apply);
  window.addEventListener("storage", (e) => { if (e.key === "theme" || e.key === null) apply(); });
  document.addEventListener("change", (e) => {
    if (e.target.matches && e.target.matches("select[data-theme-select]")) choose(e.target.value);
  });
  document.addEventListener("DOMContentLoaded", apply);
})();
