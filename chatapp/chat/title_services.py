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

from chatapp.chat.context import conversation_config, live_chat_q
from chatapp.chat.message_services import title_cut, title_from_text
from chatapp.chat.models import Conversation, Message, UserSettings
from chatapp.chat.summary_requests import background_submit
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
# Room for a title, and for the short thinking some local models print first (<think>…</think>).
MAX_TOKENS = 60

_THINKING = re.compile(r"<think>.*?(</think>|$)", re.S | re.I)
_LABEL = re.compile(r"^\s*(title|titre|titel|título|titolo)\s*:\s*", re.I)
# Quotes (straight, curly, guillemets) and markdown a model may wrap a title in.
_WRAPPERS = "\"'\u201c\u201d\u2018\u2019\u00ab\u00bb`*_#"


def title_due(*, prefs: UserSettings, conversation: Conversation, user_message: Message, first_user_id: int | None,
              target: LLMTarget) -> bool:
    """Whether this turn's reply, once complete, should have the model name the chat: the user wants it,
    the chat talks to a real model, and its title is still the first words of this, its first message
    (so a regenerated first reply does not rename a chat the model or the user named already)."""
    return (
        prefs.generate_titles
        and not target.offline
        and not conversation.title_is_custom
        and first_user_id == user_message.pk
        and conversation.title == title_from_text(text=user_message.content)
    )


def title_clean(text: str) -> str:
    """The title in a model's answer: its thinking, a "Title:" label, quotes and markdown taken off, the
    first line, cut to TITLE_MAX_CHARS at a word; "" when nothing is left."""
    text = _THINKING.sub("", text)
    line = next((ln for ln in text.splitlines() if ln.strip(_WRAPPERS + " \t")), "")
    line = _LABEL.sub("", line.strip()).strip(_WRAPPERS + " \t").rstrip(".!?;:,").strip(_WRAPPERS + " \t")
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
    second delivery of the same request changes nothing either)."""
    conversation = Conversation.objects.select_related("llm_config").filter(pk=conversation_id).first()
    if conversation is None or conversation.title_is_custom or conversation.title != expected:
        return "skipped"
    first_two = list(
        Message.objects.filter(live_chat_q(), conversation=conversation,
                               role__in=[Message.Role.USER, Message.Role.ASSISTANT])
        .order_by("id").values_list("role", "content")[:2]
    )
    if len(first_two) < 2 or first_two[0][0] != Message.Role.USER:
        return "skipped"
    (_, question), (_, answer) = first_two
    target = _target(conversation)
    if target.offline:
        return "skipped"
    messages = [
        {"role": "system", "content": TITLE_PROMPT},
        {"role": "user", "content": f"User:\n{_excerpt(question, USER_EXCERPT_CHARS)}\n\n"
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


def title_request(*, conversation_id: int, expected: str) -> None:
    """Publish the title's request to the workers, off the request path (summary_requests.background_submit)."""
    background_submit(_title_publish, conversation_id=conversation_id, expected=expected)


def _title_publish(*, conversation_id: int, expected: str) -> None:
    from chatapp.chat.tasks import generate_conversation_title  # the task module imports this one

    try:
        # One connection attempt and no publish retries, as summary jobs: a dead broker loses the title,
        # and the first words stay (nothing else depends on it).
        with generate_conversation_title.app.connection_for_write(transport_options={"max_retries": 0}) as conn:
            generate_conversation_title.apply_async(
                args=[conversation_id, expected], queue=settings.CELERY_SUMMARY_QUEUE, retry=False, connection=conn
            )
    except Exception as exc:  # kombu and redis raise several connection error types
        logger.warning("title of conversation %s not requested (broker unreachable: %s)", conversation_id, exc)
