"""The recall and search index tables (kept by search_services, read by recall_source and search
selectors). Registered through models.py, which imports this module (models.py keeps under 400 lines);
so this one names the tables it refers to ("chat.Message") instead of importing models.py back."""

from __future__ import annotations

from django.db import models
from django.db.models import Q


class MessageSearch(models.Model):
    """The full-text index row of one chat message (kept by search_services, read by recall_source).

    `terms` is `optimizer.lexical.index_text(content)`, so the database indexes exactly the core's
    terms; `scope` holds the conversation and owner as tokens ("_c12 _u3") the analyzer can never
    produce, so one full-text lookup is scoped by the index itself. The vendor part (an FTS5 table
    over these rows on SQLite, a generated tsvector with a GIN index on PostgreSQL) is raw SQL in
    chat migration 0001_squashed_0029. `recallable` marks live user/assistant chat messages: the recall corpus.
    """

    message = models.OneToOneField("chat.Message", primary_key=True, on_delete=models.CASCADE, related_name="+")
    conversation = models.ForeignKey("chat.Conversation", on_delete=models.CASCADE, related_name="+")
    scope = models.CharField(max_length=64)
    terms = models.TextField(blank=True, default="")
    # Term count of the whole message (BM25's document length), long tokens left out of `terms` included.
    length = models.PositiveIntegerField(default=0)
    recallable = models.BooleanField(default=False)

    class Meta:
        indexes = [
            # Recall: a hit's previous and next live message, one index seek each.
            models.Index(
                fields=["conversation", "message"], condition=Q(recallable=True), name="msgsearch_recall_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"index of message {self.message_id}"


class RecallTerm(models.Model):
    """How many recallable messages of a conversation contain a term (BM25's document frequency).

    Kept at write time: counting it at query time would read every posting of a common term.
    """

    conversation = models.ForeignKey("chat.Conversation", on_delete=models.CASCADE, related_name="+")
    term = models.CharField(max_length=64)
    df = models.IntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["conversation", "term"], name="recallterm_unique_term"),
        ]

    def __str__(self) -> str:
        return f"{self.term} x{self.df}"


class RecallCorpus(models.Model):
    """A conversation's recall corpus size: recallable messages and their total term count (BM25's N, avgdl)."""

    conversation = models.OneToOneField(
        "chat.Conversation", primary_key=True, on_delete=models.CASCADE, related_name="+"
    )
    docs = models.IntegerField(default=0)
    length = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"corpus of conversation {self.conversation_id}"
