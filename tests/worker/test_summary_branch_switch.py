"""Summary jobs racing a branch switch: the span and the window a job writes belong to the
branch it was planned on, not to the branch shown when it finishes."""

from __future__ import annotations

import pytest

import optimizer
from chatapp.chat.branch_services import branch_hide, branch_switch
from chatapp.chat.chat_turn import chat_turn_start, turn_pack
from chatapp.chat.message_services import message_append
from chatapp.chat.models import Conversation, SummaryJob, UserSettings
from chatapp.chat.summary_runner import summary_job_run
from chatapp.chat.summary_services import conversation_compact
from tests.support.branches import active_path

pytestmark = pytest.mark.django_db(transaction=True)


def _round(conversation, i, tag, **fields):
    q = message_append(conversation=conversation, role="user", token_model="gpt-4o-mini",
                       content=f"Question {tag}{i}: the invoice number is INV-{i}, table orders_{i}.", **fields)
    a = message_append(conversation=conversation, role="assistant", token_model="gpt-4o-mini",
                       content=f"Answer {tag}{i}: we index orders_{i} by customer_id, then read it back.")
    return q, a


def _two_branches(owner):
    """Branch B (the older ids): rounds b0..b7. Branch A (newer ids): question 3 edited, then a3..a12.
    A is shown, its window on its newest rounds."""
    conversation = Conversation.objects.create(owner=owner, title="Long", offline=True)
    b = [_round(conversation, i, "b") for i in range(8)]
    edited_q = b[3][0]
    branch_hide(conversation_id=conversation.pk, start_id=edited_q.pk)  # what chat_edit_start does
    conversation.refresh_from_db()
    a = [_round(conversation, 3, "a", parent_id=edited_q.parent_id)]
    a += [_round(conversation, i, "a") for i in range(4, 13)]
    Conversation.objects.filter(pk=conversation.pk).update(window_start_id=a[-3][0].pk)
    conversation.refresh_from_db()
    return conversation, b, a, edited_q


def _next_request(owner, conversation) -> list[str]:
    conversation.refresh_from_db()
    turn = turn_pack(start=chat_turn_start(user=owner, conversation=conversation, content="thanks, go on"))
    return [str(m["content"]) for m in turn.messages]


def test_a_compaction_finishing_after_a_switch_leaves_the_window_of_the_branch_shown(owner, published, monkeypatch):
    """/compact runs on branch A; while its summary is written the user switches back to branch B. The
    summary is written off B's path, and the window stays where B has it (it was moved to A's ids, past all of B)."""
    conversation, b, _a, edited_q = _two_branches(owner)
    Conversation.objects.filter(pk=conversation.pk).update(window_start_id=None)
    job = conversation_compact(conversation=conversation)
    real = optimizer.extractive_summary

    def summary_during_switch(*args, **kwargs):
        branch_switch(message=edited_q, index=1)  # the user switches while the summary is being written
        return real(*args, **kwargs)

    monkeypatch.setattr(optimizer, "extractive_summary", summary_during_switch)
    assert summary_job_run(job_id=job.pk).status == "done"
    job.refresh_from_db()
    conversation.refresh_from_db()
    assert job.summary.superseded  # written for branch A, kept off B: correct
    assert active_path(conversation)[-1] == b[-1][1].pk
    sent = _next_request(owner, conversation)
    # Branch B has no summary at all, so its history must still be sent.
    assert any("Answer b7" in text for text in sent), (
        f"window_start_id={conversation.window_start_id} lies past every message of branch B "
        f"(its last is {b[-1][1].pk}); the model got only: {[t[:30] for t in sent]}"
    )


def test_compact_now_after_switching_to_an_older_branch_keeps_the_newest_rounds(owner, published):
    """"compact now?" is asked on branch A (the job waits with A's span); the user switches back to B,
    then answers "Compact now": the job sums up all of B, newest rounds included, and moves the window
    past all of it."""
    UserSettings.objects.update_or_create(user=owner, defaults={"confirm_compaction": True})
    conversation, b, a, edited_q = _two_branches(owner)
    job = SummaryJob.objects.create(conversation=conversation, status=SummaryJob.Status.AWAITING_CONFIRMATION,
                                    trigger=SummaryJob.Trigger.AUTO, span_from_id=b[1][0].pk,
                                    span_through_id=a[-4][1].pk)  # as summary_job_request plans it on A
    branch_switch(message=edited_q, index=1)
    assert conversation_compact(conversation=conversation).pk == job.pk
    assert summary_job_run(job_id=job.pk).status == "done"
    job.refresh_from_db()
    conversation.refresh_from_db()
    keep_from = b[-2][0].pk  # SUMMARY_MANUAL_KEEP_ROUNDS = 2: rounds b6 and b7 stay word for word
    assert job.summary.covers_through_id < keep_from, (
        f"the summary covers through {job.summary.covers_through_id}: the path's newest reply is {b[-1][1].pk}"
    )
    sent = _next_request(owner, conversation)
    assert any("Answer b7" in text for text in sent), (
        f"window_start_id={conversation.window_start_id}; the model got only: {[t[:30] for t in sent]}"
    )


def test_a_compaction_whose_span_ends_where_the_branches_part_leaves_the_other_branch_its_window(
    owner, published, monkeypatch
):
    """Branch A parts from B at its second-newest question, so /compact on A sums up only what the two
    share (A's two rounds stay word for word). The user switches to B while the summary is written:
    the summary is B's too (it covers what they share), but the window A's compaction would move to its
    own question lies past every message of B."""
    conversation = Conversation.objects.create(owner=owner, title="Long", offline=True)
    b = [_round(conversation, i, "b") for i in range(8)]
    edited_q = b[3][0]
    branch_hide(conversation_id=conversation.pk, start_id=edited_q.pk)
    conversation.refresh_from_db()
    a = [_round(conversation, 3, "a", parent_id=edited_q.parent_id), _round(conversation, 4, "a")]
    job = conversation_compact(conversation=conversation)
    real = optimizer.extractive_summary

    def summary_during_switch(*args, **kwargs):
        branch_switch(message=edited_q, index=1)
        return real(*args, **kwargs)

    monkeypatch.setattr(optimizer, "extractive_summary", summary_during_switch)
    assert summary_job_run(job_id=job.pk).status == "done"
    job.refresh_from_db()
    conversation.refresh_from_db()
    assert job.summary.covers_through_id == b[2][1].pk and not job.summary.superseded  # shared by A and B
    assert active_path(conversation)[-1] == b[-1][1].pk
    sent = _next_request(owner, conversation)
    assert any("Answer b7" in text for text in sent), (
        f"window_start_id={conversation.window_start_id} (A's question {a[0][0].pk}) lies past every message "
        f"of branch B (its last is {b[-1][1].pk}); the model got only: {[t[:30] for t in sent]}"
    )
