"""A reply the user stopped is sent to the model from now on, as far as it went (context.live_chat_q):
"go on" after Stop reaches a model that knows what it said. The stopped replies already stored on
the paths shown join their conversations' live totals (their token counts taken again: a reply
stopped by a request whose stream was gone kept the count of its first empty row) and recall's
index (their rows marked recallable, the conversation's BM25 statistics moved by their terms).

Backwards, they leave both again: the older code counts complete replies only.
"""

from collections import Counter, defaultdict

from django.db import migrations
from django.db.models import F

import optimizer
from chatapp.chat.search_reindex import stats_move

OFFLINE_MODEL = "offline-demo"  # chatapp.providers.llm.OFFLINE_MODEL, as it was when this was written


def _stopped(apps):
    Message = apps.get_model("chat", "Message")
    return Message.objects.filter(kind="chat", status="stopped", superseded=False, role="assistant")


def _move(apps, *, sign: int) -> None:
    Message = apps.get_model("chat", "Message")
    Conversation = apps.get_model("chat", "Conversation")
    MessageSearch = apps.get_model("chat", "MessageSearch")
    totals: defaultdict[int, Counter[str]] = defaultdict(Counter)
    rows = _stopped(apps).order_by("id").values_list("id", "conversation_id", "content", "model", "char_count",
                                                      "token_count")
    for pk, conversation_id, content, model, chars, tokens in rows.iterator(chunk_size=1000):
        counted = optimizer.count_message({"role": "assistant", "content": content}, model=model or "gpt-4o")
        if (chars, tokens) != (len(content), counted):
            Message.objects.filter(pk=pk).update(char_count=len(content), token_count=counted)
        t = totals[conversation_id]
        t.update({"n": 1, "chars": len(content), "tokens": counted})
        if model == OFFLINE_MODEL:
            t.update({"offline_n": 1, "offline_chars": len(content), "offline_tokens": counted})
    for conversation_id, t in sorted(totals.items()):
        Conversation.objects.filter(pk=conversation_id).update(
            live_message_count=F("live_message_count") + sign * t["n"],
            live_char_count=F("live_char_count") + sign * t["chars"],
            live_token_count=F("live_token_count") + sign * t["tokens"],
            offline_reply_count=F("offline_reply_count") + sign * t["offline_n"],
            offline_reply_chars=F("offline_reply_chars") + sign * t["offline_chars"],
            offline_reply_tokens=F("offline_reply_tokens") + sign * t["offline_tokens"],
        )
    # Recall: the rows that change side, and the statistics moved by them.
    indexed = MessageSearch.objects.filter(message_id__in=_stopped(apps).values("id"), recallable=sign < 0)
    df: defaultdict[int, Counter[str]] = defaultdict(Counter)
    docs: Counter[int] = Counter()
    length: Counter[int] = Counter()
    for conversation_id, terms, n_terms in indexed.values_list("conversation_id", "terms", "length").iterator():
        df[conversation_id].update({term: sign for term in set(terms.split())})
        docs[conversation_id] += sign
        length[conversation_id] += sign * n_terms
    indexed.update(recallable=sign > 0)
    stats_move(apps, df=df, length_delta=length, docs_delta=docs)


def stopped_replies_live(apps, schema_editor):
    _move(apps, sign=1)


def stopped_replies_not_live(apps, schema_editor):
    _move(apps, sign=-1)


class Migration(migrations.Migration):
    dependencies = [("chat", "0011_search_run_last_character")]

    operations = [migrations.RunPython(stopped_replies_live, stopped_replies_not_live)]
