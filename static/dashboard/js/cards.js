/* The headline cards: drawn by the server, completed here (the prompt-cache estimate, the next
 * request), and drawn again when a summary is edited or discarded. */
import { getJSON, root, state } from "./state.js";
import { h, nf, usd } from "./util.js";

// The money card gains the prompt-cache estimate computed with the series.
export function showCacheEstimate(est) {
  const card = document.querySelector("[data-card=money]");
  if (!card || !est || est.sent_usd_with_cache === null || !est.cached_tokens) return;
  const reported = est.provider_reported_turns || 0;
  // A refused request (billed nothing) is neither reported nor estimated.
  const source = !reported ? "est." : reported + (est.refused_turns || 0) >= state.series.count
    ? "reported by the endpoint" : "partly estimated";
  card.append(h("p", { class: "dash-card-detail", "data-cache-estimate": est.cached_tokens,
    title: "Turns whose endpoint reported its cached prompt tokens use that figure; for the others, between triggers each request starts with the previous one, which the provider's prompt cache bills at the cached-input price.",
    text: `Sent ${usd(est.sent_usd)}, ≈ ${usd(est.sent_usd_with_cache)} with prompt caching (${Math.round(est.cached_share * 100)}% cached, ${source})`
      // The costs are the priced turns'; the turns of a model with no price are named, not hidden.
      + (est.unpriced_turns ? ` · ${nf.format(est.unpriced_turns)} turn${est.unpriced_turns === 1 ? "" : "s"} unpriced` : "") }));
}

// The usage card also shows what the next request will send (the chat's context gauge), when available.
export async function showNextRequest() {
  const card = document.querySelector("[data-card=usage]");
  if (!card) return;
  let gauge;
  try {
    gauge = await getJSON(`/api/conversations/${root.dataset.conversation}/context/`);
  } catch (e) {
    return; // the numbers of the latest request stay
  }
  if (typeof gauge.tokens !== "number" || !gauge.budget) return;
  card.append(h("p", { class: "dash-card-detail", "data-next-tokens": gauge.tokens,
    text: `Next request: ${nf.format(gauge.tokens)} tokens (${Math.round(100 * gauge.tokens / gauge.budget)}% of ${nf.format(gauge.budget)})` }));
}


// After a summary is edited or discarded the cards (summaries made and discarded, the next request)
// no longer hold: the page's cards are read again from the server, which draws them.
export async function refreshCards() {
  const res = await fetch(window.location.pathname, { credentials: "same-origin" });
  if (!res.ok) return;
  const fresh = new DOMParser().parseFromString(await res.text(), "text/html").querySelector(".dash-cards");
  const cards = document.querySelector(".dash-cards");
  if (!fresh || !cards) return;
  cards.replaceWith(document.importNode(fresh, true));
  showCacheEstimate(state.series.prompt_cache_estimate);
  await showNextRequest();
}
