"""Chat titles written by the model (UserSettings.generate_titles), as ChatGPT, Open WebUI and LibreChat
name a new chat.

After a new chat's first complete reply, a worker asks the user's summary model (or the chat's own)
for a short title and stores it, unless the chat was named meanwhile. The chat never waits for it:
the first words of the first message are the title until then (message_services.title_from_text),
and stay it when the call fails. The page is told a title is coming (`title_pending` in the turn's
`done` event) and looks for it (static/js/chat/title_follow.js).
"""

from __future__ import annotations

import logging
import re

from django.conf import settings
from django.core.cache import cache

from chatapp.chat.context import conversation_config, live_chat_q
from chatapp.chat.context_images import messages_with_placeholders
from chatapp.chat.message_services import title_cut
from chatapp.chat.models import Conversation, Message, UserSettings
from chatapp.chat.summary_requests import background_submit
from chatapp.chat.textsafe import text_storable
from chatapp.providers.llm import LLMError, LLMTarget, llm_complete, llm_target_for

logger = logging.getLogger(__name__)

TITLE_PROMPT = (
    "Write a title for the conversation below: 2 to 6 words, in the language of the user's message, "
    "naming what it is about. Reply with the title only: no quotes, no emoji, no final punctuation."
)
# What the model reads: the start of the first message and of the reply are what a title names, and a
# pasted document would otherwise make this small call a large one.
USER_EXCERPT_CHARS = 2000
REPLY_EXCERPT_CHARS = 800
# Room for a title, and for the thinking of reasoning models, which counts against the limit (local ones
# print it first, <think>…</think>; OpenAI's spend it unseen): with 60, many never reached the title.
# Other models stop after a few words whatever the limit; what is stored is cut to TITLE_MAX_CHARS.
MAX_TOKENS = 600
# How long a chat's title counts as coming (title_pending): a worker usually names it within seconds; past
# this, the first words stay (the model call failed, or no worker runs) and no page waits for it.
TITLE_PENDING_SECONDS = 90
# A title's message is delivered again when its worker dies (acks_late). A chat whose title request kills
# its worker every time (a reply that exhausts the worker's memory) would loop for ever: it runs twice at
# most, counted in the cache (Redis, where redeliveries happen: the embedded broker does not redeliver).
TITLE_MAX_DELIVERIES = 2
_DELIVERIES_SECONDS = 86_400

_THINKING = re.compile(r"<think>.*?(</think>|$)", re.S | re.I)
# "Title:", "**Title:**", "## Title:" and the like, in a few languages.
_LABEL = re.compile(r"^[\s*_#]*(title|titre|titel|título|titolo)[\s*_]*:[\s*_]*", re.I)
# Quotes (straight, curly, guillemets) and markdown a model may wrap a title in.
_WRAPPERS = "\"'\u201c\u201d\u2018\u2019\u00ab\u00bb`*_#"


def title_due(*, prefs: UserSettings, conversation: Conversation, target: LLMTarget) -> bool:
    """Whether this turn's reply, once complete, should have the model name the chat: the user wants it,
    the chat talks to a real model, was not named by the user, and the model was not asked yet (its
    first complete reply; a first reply that failed leaves it to the next one, a Retry, an Edit or a
    new message)."""
    return (
        prefs.generate_titles
        and not target.offline
        and not conversation.title_is_custom
        and not conversation.title_requested
    )


def title_clean(text: str) -> str:
    """The title in a model's answer: its thinking, a "Title:" label, quotes and markdown taken off, the
    first line, cut to TITLE_MAX_CHARS at a word; "" when nothing is left."""
    # A provider's JSON may carry what no database column stores (NUL, a lone surrogate).
    text = _THINKING.sub("", text_storable(text))
    lines = (_LABEL.sub("", ln.strip()).strip(_WRAPPERS + " \t") for ln in text.splitlines())
    line = next((ln for ln in lines if ln), "")  # a label alone on its line: the title is on the next
    line = line.rstrip(".!?;:,").strip(_WRAPPERS + " \t")
    return title_cut(" ".join(line.split()))


def _excerpt(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit].rstrip() + " […]"


def _target(conversation: Conversation) -> LLMTarget:
    """The user's summary model when they chose one (a cheaper model for background work), else the chat's."""
    prefs = UserSettings.objects.filter(user_id=conversation.owner_id).select_related("summary_config").first()
    if prefs is not None and prefs.summary_config_id:
        return llm_target_for(config=prefs.summary_config)
    return llm_target_for(config=conversation_config(conversation=conversation))


def conversation_title_generate(*, conversation_id: int, expected: str) -> str:
    """Ask the model for the chat's title and store it over `expected`, the title it had when asked; what
    happened, in a word. A chat renamed, named or deleted since is left alone (a conditional update, so a
    second delivery of the same request changes nothing either). Whatever happened, the title is no
    longer pending."""
    try:
        if _deliveries_count(conversation_id) > TITLE_MAX_DELIVERIES:
            logger.error("no title for conversation %s: its worker died on each of %d deliveries",
                         conversation_id, TITLE_MAX_DELIVERIES)
            return "abandoned"
        return _title_generate(conversation_id=conversation_id, expected=expected)
    finally:
        _pending_clear(conversation_id)


def _deliveries_count(conversation_id: int) -> int:
    """This delivery's number among the chat's title deliveries (1 where the cache fails: then unbounded,
    as a title is worth no more than that)."""
    key = f"chat-title-deliveries:{conversation_id}"
    try:
        cache.add(key, 0, _DELIVERIES_SECONDS)
        return int(cache.incr(key))
    except Exception as exc:  # redis-py raises several connection error types; incr a lapsed key, ValueError
        logger.warning("title of conversation %s: deliveries not counted (cache: %s)", conversation_id, exc)
        return 1


def _title_generate(*, conversation_id: int, expected: str) -> str:
    # Not for an account an admin turned off since the title was asked for: it can do nothing else, and
    # its endpoint is not called for it.
    conversation = (
        Conversation.objects.select_related("llm_config").filter(pk=conversation_id, owner__is_active=True).first()
    )
    if conversation is None or conversation.title_is_custom or conversation.title != expected:
        return "skipped"
    # The first exchange that has an answer (a first message whose reply failed has none).
    first = (Message.objects.filter(live_chat_q(), conversation=conversation, role=Message.Role.ASSISTANT)
             .order_by("id").values_list("reply_to_id", "content").first())
    question = Message.objects.filter(pk=first[0]).only("id", "role", "content").first() if first else None
    if first is None or question is None:
        return "skipped"
    # Its images as the summarizer reads them ("[image: 640x480]"): an image sent alone is all there is to name.
    [question] = messages_with_placeholders([question], has_images=conversation.has_images)
    answer = first[1]
    target = _target(conversation)
    if target.offline:
        return "skipped"
    messages = [
        {"role": "system", "content": TITLE_PROMPT},
        {"role": "user", "content": f"User:\n{_excerpt(question.content, USER_EXCERPT_CHARS)}\n\n"
                                    f"Assistant:\n{_excerpt(answer, REPLY_EXCERPT_CHARS)}"},
    ]
    try:
        # The SDK's own backoff on 429, 5xx and timeouts, twice at most: a title is not worth more.
        completion = llm_complete(target=target, messages=messages, max_tokens=MAX_TOKENS, max_retries=2,
                                  timeout=settings.SUMMARY_TIMEOUT_SECONDS)
    except LLMError as exc:
        logger.warning("no title for conversation %s: %s (%s)", conversation_id, exc.kind, exc.detail)
        return "failed"
    title = title_clean(completion.text)
    if not title:
        return "empty"
    named = Conversation.objects.filter(pk=conversation_id, title_is_custom=False, title=expected).update(title=title)
    return "named" if named else "skipped"


def _pending_key(conversation_id: int) -> str:
    return f"chat-title-pending:{conversation_id}"


# The mark is a convenience for other pages: a cache that fails (Redis restarting) must never cost the
# reply stored after it, nor the page that reads it; it is then as if no title were coming.


async def title_pending_mark(*, conversation_id: int, expected: str) -> None:
    """Say a title is coming to replace `expected`, before the first reply is stored complete: a tab that
    follows that reply (another tab's, or one from before a reload) then finds it pending as soon as it
    sees the reply end. In the cache, which Redis shares between every process; it lapses by itself if
    no worker ever answers."""
    try:
        await cache.aset(_pending_key(conversation_id), expected, TITLE_PENDING_SECONDS)
    except Exception as exc:  # redis-py raises several connection error types
        logger.warning("title of conversation %s not marked pending (cache: %s)", conversation_id, exc)


async def title_pending_drop(*, conversation_id: int) -> None:
    """The first reply was stopped after all (a stop landing after its last chunk): no title is asked."""
    try:
        await cache.adelete(_pending_key(conversation_id))
    except Exception as exc:  # the mark then lapses by itself
        logger.warning("title of conversation %s still marked pending (cache: %s)", conversation_id, exc)


def title_pending(*, conversation: Conversation) -> bool:
    """Whether the model's title for this chat is on its way (the page then follows it: title_follow.js):
    marked, and the chat still has the title it was to replace. The title itself says when the worker
    named the chat, also where its clearing of the mark cannot reach this process (without Redis, each
    process's cache is its own)."""
    if conversation.title_is_custom:
        return False
    try:
        return cache.get(_pending_key(conversation.pk)) == conversation.title
    except Exception as exc:
        logger.warning("title of conversation %s: pending unknown (cache: %s)", conversation.pk, exc)
        return False


def _pending_clear(conversation_id: int) -> None:
    try:
        cache.delete(_pending_key(conversation_id))
    except Exception as exc:  # the mark then lapses by itself
        logger.warning("title of conversation %s still marked pending (cache: %s)", conversation_id, exc)


def title_request(*, conversation_id: int, expected: str) -> None:
    """Ask a worker to name the chat, off the request path (summary_requests.background_submit)."""
    background_submit(_title_request_run, conversation_id=conversation_id, expected=expected)


def _title_request_run(*, conversation_id: int, expected: str) -> None:
    # Once per chat: two tabs' first replies, or a reply after a failed publish, find it asked already.
    asked = Conversation.objects.filter(pk=conversation_id, title_requested=False, title_is_custom=False).update(
        title_requested=True
    )
    if asked:
        _title_publish(conversation_id=conversation_id, expected=expected)
    else:
        _pending_clear(conversation_id)  # asked before (its worker clears it) or named by the user meanwhile


def _title_publish(*, conversation_id: int, expected: str) -> None:
    from chatapp.chat.tasks import generate_conversation_title  # the task module imports this one

    try:
        # One connection attempt and no publish retries, as summary jobs: a dead broker loses the title,
        # and the first words stay (nothing else depends on it).
        with generate_conversation_title.app.connection_for_write(transport_options={"max_retries": 0}) as conn:
            # Celery's default queue, not the summaries': a title must not wait behind a backlog of
            # summaries (every worker the README starts, and serve's, consume both).
            generate_conversation_title.apply_async(args=[conversation_id, expected], retry=False, connection=conn)
    except Exception as exc:  # kombu and redis raise several connection error types
        logger.warning("title of conversation %s not requested (broker unreachable: %s)", conversation_id, exc)
        _pending_clear(conversation_id)
