"""chat.0012: stopped replies are live from now on (sent, counted, recalled). A database made by the
release before, whose stopped replies were none of those, gets them into its conversations' live
totals and recall's index exactly as the current code would have counted and indexed them; going
back takes them out again."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

import optimizer
from chatapp.chat.models import Conversation
from chatapp.chat.search_services import conversation_index_rebuild, index_terms
from tests.support.migrations import migrated_back, search_index_state
from tests.support.totals import recount, stored_totals

BEFORE = ("chat", "0011_search_run_last_character")
AFTER = ("chat", "0012_stopped_replies_live")

# (role, content, status, superseded, token count as stored): a stopped reply whose stream was gone
# when it was stopped kept its empty row's count; another was stopped, then replaced by Retry.
ROWS = [
    ("user", "Which ferry goes to Cacilhas?", "complete", False, 12),
    ("assistant", "The orange ferry from Cais do Sodré leaves every", "stopped", False, 3),
    ("assistant", "A stopped reply that Retry replaced", "stopped", True, 11),
    ("assistant", "The Cacilhas ferry leaves Cais do Sodré every twenty minutes.", "complete", False, 17),
    ("user", "And the last one at night?", "complete", False, 11),
    ("assistant", "", "stopped", False, 3),
]


def _old_conversation(old, *, owner_id: int) -> int:
    """The conversation as the release before wrote it: totals and recall over complete replies only."""
    conversation = old.get_model("chat", "Conversation").objects.create(owner_id=owner_id, title="ferries")
    Message_, Search = old.get_model("chat", "Message"), old.get_model("chat", "MessageSearch")
    live = [r for r in ROWS if r[2] == "complete" and not r[3]]
    df: dict[str, int] = {}
    for role, content, status, superseded, tokens in ROWS:
        message = Message_.objects.create(conversation=conversation, role=role, content=content, status=status,
                                          superseded=superseded, token_count=tokens, char_count=len(content),
                                          model="gpt-4o" if role == "assistant" else "")
        terms, length = index_terms(content=content)
        recallable = status == "complete" and not superseded
        Search.objects.create(message_id=message.pk, conversation_id=conversation.pk,
                              scope=f"_c{conversation.pk} _u{owner_id}" if not superseded else f"_c{conversation.pk}",
                              terms=terms, length=length, recallable=recallable)
        for term in set(terms.split()) if recallable else ():
            df[term] = df.get(term, 0) + 1
    Term = old.get_model("chat", "RecallTerm")
    Term.objects.bulk_create([Term(conversation_id=conversation.pk, term=t, df=n) for t, n in df.items()])
    old.get_model("chat", "RecallCorpus").objects.create(
        conversation_id=conversation.pk, docs=len(live), length=sum(index_terms(content=r[1])[1] for r in live)
    )
    old.get_model("chat", "Conversation").objects.filter(pk=conversation.pk).update(
        live_message_count=len(live), live_char_count=sum(len(r[1]) for r in live),
        live_token_count=sum(r[4] for r in live),
    )
    return conversation.pk


@pytest.mark.django_db(transaction=True)
def test_stopped_replies_join_the_totals_and_recall_and_leave_them_going_back():
    owner = get_user_model().objects.create_user(username="stopped-live", password="a long test password 2")
    with migrated_back(BEFORE) as old:
        pk = _old_conversation(old, owner_id=owner.pk)
        before = dict(old.get_model("chat", "Conversation").objects.filter(pk=pk).values(
            "live_message_count", "live_char_count", "live_token_count").get())
        call_command("migrate", *AFTER, verbosity=0)
        # Today's model, reading each field as it is used: later migrations add columns (chat 0016's).
        conversation = Conversation.objects.only("id", "owner_id").get(pk=pk)
        # The release's own model: today's has columns that later migrations add.
        old_messages = old.get_model("chat", "Message").objects
        partial = old_messages.get(conversation_id=pk, content__startswith="The orange ferry")
        # counted again: what reply_store writes for its text
        assert partial.token_count == optimizer.count_message(
            {"role": "assistant", "content": partial.content}, model="gpt-4o")
        assert stored_totals(conversation) == recount(conversation)
        assert stored_totals(conversation)["live_message_count"] == 6 - 1  # all but the replaced reply
        migrated = search_index_state(pk)
        conversation_index_rebuild(conversation=conversation)
        assert search_index_state(pk) == migrated
        assert migrated[1]["orang"] == 1  # the stopped reply's words are recall's now

        call_command("migrate", *BEFORE, verbosity=0)
        back = dict(old.get_model("chat", "Conversation").objects.filter(pk=pk).values(*before).get())
        assert back == before
        assert not old.get_model("chat", "MessageSearch").objects.filter(message_id=partial.pk).get().recallable
