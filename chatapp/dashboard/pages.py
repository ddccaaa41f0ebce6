"""Dashboard pages: the headline cards rendered on the server; charts, the map, summaries and \"what
the model saw\" are drawn in the browser from the JSON API (`api`), so page and API always agree.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache

from chatapp.chat.selectors import conversation_back_url
from chatapp.chat.views import page_csp
from chatapp.dashboard.headline import dashboard_conversation_get, dashboard_headline
from chatapp.dashboard.message_map import MAP_STATUS_LABELS, MAP_STATUSES
from chatapp.dashboard.overview import dashboard_overview

MINUS = "\u2212"

NO_REQUEST = "No request yet"


def _tokens(n: int | None) -> str:
    if n is None:
        return "—"
    if abs(n) < 1_000:
        return f"{n:,}"
    # Digits chosen on the value as rounded, and the unit too: 999,999 is "1.0M", not "1000k".
    div, suffix = next((d, s) for d, s in ((1_000, "k"), (1_000_000, "M"), (1_000_000_000, "B"))
                       if s == "B" or abs(round(n / d)) < 1_000)
    value = n / div
    digits = 1 if abs(round(value, 1)) < 100 else 0
    return f"{value:.{digits}f}{suffix}"


def _saving_tone(x: float | None) -> str:
    if x is None:
        return ""
    return "good" if x > 0 else ("bad" if x < 0 else "")


def _usd(x: float | None) -> str:
    if x is None:
        return "—"
    if round(x, _usd_places(x)) == 0:
        return "$0"  # not "$0.0000", nor minus that for a hair below zero
    sign = MINUS if x < 0 else ""
    x = abs(x)
    if x >= 100:
        return f"{sign}${x:,.0f}"
    if x >= 1:
        return f"{sign}${x:,.2f}"
    if x == 0:
        return "$0"
    return f"{sign}${x:.4f}"


def _usd_places(x: float) -> int:
    """The decimals _usd shows `x` with (0 for zero, which it shows as "$0")."""
    x = abs(x)
    return 0 if x >= 100 or x == 0 else (2 if x >= 1 else 4)


def _net_saved(gross: float | None, summary: float) -> tuple[str, str, str, float | None]:
    """The money card's "gross saved - summarizing" parts and its net, as displayed: the parts at the
    decimals the finest of the three needs, the net their difference. Each figure rounded on its own
    could contradict the subtraction a reader does ("$18.18 saved - $0.2959" beside a net of $17.89,
    or "$2.35 - $2.34" beside $0.0001). Returns the gross and summary labels, the net's label and the
    net as shown (None when the saving is unknown)."""
    if gross is None:
        return _usd(None), _usd(summary), _usd(None), None
    places = max(_usd_places(gross), _usd_places(summary), _usd_places(gross - summary))
    shown_gross, shown_summary = round(gross, places), round(summary, places)
    net = round(shown_gross - shown_summary, places)

    def part(x: float) -> str:
        return f"{MINUS if x < 0 else ''}${abs(x):,.{places}f}" if x else "$0"

    return part(shown_gross), part(shown_summary), _usd(net), net


def _money_parts(*, gross_label: str, summary_label: str, refused: int, unpriced: int) -> str:
    """The money card's detail before its notes. With no request priced and billed and no summary paid
    for, "— saved - $0 summarizing" subtracts nothing from nothing: it says so in words instead, and
    why: no price (a local model the registry has none for: `unpriced` turns), or a priced request
    billed nothing (refused by the endpoint, or never sent: `refused` turns)."""
    if gross_label == _usd(None) and summary_label == "$0":
        why = "priced and billed" if refused and unpriced else "billed" if refused else "priced"
        return f"No saving to count: no request was {why}"
    return f"{gross_label} saved {MINUS} {summary_label} summarizing"


def _pct(x: float | None, digits: int = 0) -> str:
    return "—" if x is None else f"{x * 100:.{digits}f}%"


def _per_million(price: float | None) -> str:
    return "—" if price is None else f"${price * 1_000_000:,.3g}/M"


def _cards(h: dict[str, Any]) -> list[dict[str, Any]]:
    tokens, money, summaries, usage, acc = h["tokens"], h["money"], h["summaries"], h["usage"], h["accuracy"]
    strat = h["strategies"]
    prices = money["prices"]
    price_note = ""
    if prices:
        price_note = f"input {_per_million(prices['input'])}"
        if prices.get("cached_input") is not None:
            price_note += f", cached {_per_million(prices['cached_input'])}"
    gross_label, summary_label, net_label, net_shown = _net_saved(money["gross_saved_usd"], money["summary_cost_usd"])
    cards = _quiet_when_empty(h["turns"], [
        {
            "key": "tokens",
            "label": "Tokens not sent",
            "value": _tokens(tokens["saved"]),
            # Two kinds, never added up as one saving: replaced by a summary vs left out altogether.
            "detail": (
                f"{_pct(tokens['saved_share'])} of {_tokens(tokens['full'])} full-history tokens: "
                f"{_tokens(tokens['summarized'])} replaced by summaries or compressed · "
                f"{_tokens(tokens['dropped'])} dropped with no summary"
                + (f" ({_plural(tokens['dropped_unmeasured'], 'turn')} not measured)"
                   if tokens["dropped_unmeasured"] else "")
            ),
            "meter": tokens["saved_share"],
            "tone": "good" if tokens["saved"] > 0 else "",
        },
        {
            "key": "money",
            "label": "Money saved (net)",
            "value": net_label,
            "detail": (
                _money_parts(gross_label=gross_label, summary_label=summary_label, refused=money["refused_turns"],
                             unpriced=money["unpriced_records"])
                + (f" · {price_note}" if price_note else "")
                + (f" · {_plural(money['unpriced_records'], 'turn')} unpriced" if money["unpriced_records"] else "")
                # record_finish's billed=False: refused before any reply text, or never sent at all
                + (f" · {_plural(money['refused_turns'], 'turn')} not billed (refused by the endpoint or never sent)"
                   if money["refused_turns"] else "")
            ),
            "tone": _saving_tone(net_shown),
        },
        {
            "key": "summaries",
            "label": "Summaries made",
            "value": f"{summaries['made']:,}",
            "detail": (
                f"{summaries['extractive']} extractive · {summaries['discarded']} discarded"
                # requests sent with a truncated window (a cut, or the window an earlier cut left)
                f" · {_plural(strat['truncate'], 'request')} truncated" + _recall_detail(h["recall"])
                + _failed_detail(summaries)
            ),
        },
    ], summarizing=money["summary_cost_usd"])
    if usage:
        cards.append({
            "key": "usage",
            "label": "Current usage",
            "value": _pct(usage["ratio"]),
            "detail": f"{usage['tokens']:,} of {usage['budget']:,} budget at the latest request"
            f" · window {usage['context_window']:,}" + (" · estimated count" if usage["estimated"] else ""),
            "meter": min(1.0, usage["ratio"] or 0),
            "tone": "bad" if (usage["ratio"] or 0) > 1 else ("warn" if (usage["ratio"] or 0) > 0.8 else ""),
        })
    else:
        cards.append({"key": "usage", "label": "Current usage", "value": "—", "detail": NO_REQUEST})
    if acc:
        # One claim per figure: the value is how close each request's count was (bounded: a provider
        # that counts very differently gives "—", not a negative accuracy); the detail adds the totals.
        error = acc["error_share"]
        accuracy = "—" if error >= 1 else _pct(1 - error, 1)
        accuracy_detail = (
            f"per request, ours differs from the provider's count by {error * 100:.1f}% on average"
            + (" (it counts differently: tools, images or cached prompts)" if error >= 1 else "")
            + f"; in total ours {_tokens(acc['ours'])} vs {_tokens(acc['provider'])} "
            f"({'+' if acc['bias_share'] >= 0 else MINUS}{abs(acc['bias_share']) * 100:.1f}%) "
            f"over {_plural(acc['requests'], 'request')}"
        )
    else:
        accuracy, accuracy_detail = "—", "The endpoint has not reported usage yet"
    cards.append({"key": "accuracy", "label": "Counting accuracy", "value": accuracy, "detail": accuracy_detail})
    return cards


def _recall_detail(recall: dict[str, Any]) -> str:
    """Recall next to the summaries: both bring old history back, and quoted messages are not lost."""
    if not recall["turns"]:
        return ""
    return (
        f" · {_plural(recall['messages'], 'message')} recalled on {_plural(recall['turns'], 'turn')}"
        f" ({_tokens(recall['tokens'])} tokens)"
    )


def _quiet_when_empty(turns: int, cards: list[dict[str, Any]], *, summarizing: float) -> list[dict[str, Any]]:
    """With no request yet, the token and money cards say so, as the usage card does, instead of
    figures of nothing ("0% of 0 full-history tokens", "— saved - $0 summarizing"); the money card
    keeps its figures where summarizing cost something all the same (a chat imported, then compacted)."""
    if turns:
        return cards
    for card in cards:
        if card["key"] == "tokens" or (card["key"] == "money" and not summarizing):
            card.update(detail=NO_REQUEST, meter=None, tone="")
    return cards


def _failed_detail(summaries: dict[str, Any]) -> str:
    """Summary jobs that failed, with the latest one's reason (a sentence, as the worker wrote it)."""
    if not summaries["jobs_failed"]:
        return ""
    reason = summaries["latest_failure"]
    return f" · {_plural(summaries['jobs_failed'], 'summary job')} failed" + (f": {reason}" if reason else "")


def _with_meters(cards: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for card in cards:
        meter = card.get("meter")
        card["meter_pct"] = None if meter is None else round(max(0.0, min(1.0, meter)) * 100, 1)
    return cards


@never_cache  # as the chat pages (chatapp.chat.views.chat_new says why)
@login_required
@page_csp
def dashboard_conversation_page(request: HttpRequest, pk: int) -> HttpResponse:
    conversation = dashboard_conversation_get(user=request.user, pk=pk)
    headline = dashboard_headline(conversation=conversation)
    return render(request, "dashboard/conversation.html", {
        "conversation": conversation,
        "headline": headline,
        "cards": _with_meters(_cards(headline)),
        "chat_url": reverse("chat-detail", args=[conversation.pk]),
        "legend": [{"key": s, "label": MAP_STATUS_LABELS[s]} for s in MAP_STATUSES],
        "first_optimized_turn": headline["strategies"]["first_optimized_turn"],
        "subtitle": _subtitle(turns=headline["turns"], messages=conversation.live_message_count,
                              first=headline["strategies"]["first_optimized_turn"]),
    })


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _subtitle(*, turns: int, messages: int, first: int | None) -> str:
    parts = [_plural(turns, "request"), _plural(messages, "message")]
    if first:
        parts.append(f"optimized from turn {first:,}")
    return " · ".join(parts)


@never_cache  # as the chat pages (chatapp.chat.views.chat_new says why)
@login_required
@page_csp
def dashboard_overview_page(request: HttpRequest) -> HttpResponse:
    overview = dashboard_overview(user=request.user, top=10)
    top = overview["top"]
    biggest = max((r["tokens_saved"] for r in top), default=0) or 1
    for row in top:
        # A visible sliver for any saving, however small next to the biggest.
        row["bar_pct"] = 0 if row["tokens_saved"] <= 0 else max(0.6, round(100 * row["tokens_saved"] / biggest, 1))
        row["saved_label"] = _tokens(row["tokens_saved"])
        row["full_label"] = _tokens(row["tokens_full"])
        row["share_label"] = _pct(row["saved_share"])
        row["money_label"] = _usd(row["net_saved_usd"])
        row["turns_label"] = _plural(row["turns"], "request")
    money = overview["money"]
    # As on a conversation's card: the gross saving is unknown ("—") when no request was priced.
    gross = None if money["net_saved_usd"] is None else money["full_usd"] - money["sent_usd"]
    gross_label, summary_label, net_label, net_shown = _net_saved(gross, money["summary_cost_usd"])
    cards = _quiet_when_empty(overview["turns"], [
        {"key": "tokens", "label": "Tokens not sent", "value": _tokens(overview["tokens"]["saved"]),
         "detail": f"{_pct(overview['tokens']['saved_share'])} of {_tokens(overview['tokens']['full'])}: "
                   f"{_tokens(overview['tokens']['summarized'])} replaced by summaries or compressed · "
                   f"{_tokens(overview['tokens']['dropped'])} dropped with no summary",
         "meter": overview["tokens"]["saved_share"], "tone": "good" if overview["tokens"]["saved"] > 0 else ""},
        {"key": "money", "label": "Money saved (net)", "value": net_label,
         "detail": _money_parts(gross_label=gross_label, summary_label=summary_label,
                                refused=money["refused_turns"], unpriced=money["unpriced_records"])
                   + (f" · {other} summarizing chats with no saving known"
                      if (other := _usd(money["summary_cost_other_usd"])) != "$0" else ""),
         "tone": _saving_tone(net_shown)},  # a loss overall as on a conversation's card
        {"key": "summaries", "label": "Summaries made", "value": f"{overview['summaries']['made']:,}",
         "detail": _plural(overview["summaries"]["jobs"], "summary job")},
        {"key": "turns", "label": "Requests", "value": f"{overview['turns']:,}",
         "detail": f"{overview['optimized_turns']:,} optimized · "
                   f"{_plural(overview['conversations_with_records'], 'conversation')} with requests"},
    ], summarizing=money["summary_cost_usd"] + money["summary_cost_other_usd"])
    subtitle = f"{_plural(overview['conversations'], 'conversation')} · {_plural(overview['turns'], 'request')}"
    return render(request, "dashboard/overview.html", {
        "overview": overview, "cards": _with_meters(cards), "top": top, "subtitle": subtitle,
        "back_url": conversation_back_url(owner=request.user),
    })
