/* The dashboard page's element, its API address and the state its modules share. */
export const root = document.getElementById("dash");
export const SVGNS = "http://www.w3.org/2000/svg";
export const api = root?.dataset.api; // /api/dashboard/conversations/<pk>/
export const chatUrl = root?.dataset.chatUrl;
// Shared page helpers (static/js/common.js): CSRF-aware JSON fetch, error wording, the confirm dialog.
export const { api: request, getJSON, errorText, confirmAction } = Longchat; // common.js (a classic script: its top-level const is global)
// `ranges`: the series API's answer for a zoomed range of a long conversation (one per range button).
export const state = { series: null, ranges: {}, map: null, turn: null, recordsOffset: null, recordsShown: 0, summariesBefore: null };
