"""The share links' table (issue 13: read-only share links). Registered through models.py, which
imports this module (models.py is near the 400-line bound a module keeps to).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class ConversationShare(models.Model):
    """A read-only snapshot of a conversation, readable by anyone holding its link (issue 13).

    The snapshot is `through_message_id`: the newest message when the link was made. The public page
    shows the conversation's live user/assistant messages up to it, so what is said afterwards is never
    exposed. A conversation may have several live links (each its own snapshot, revoked one by one);
    each share makes a new link, since a link is shown only when it is made (share_services).
    Revoking keeps the row (`revoked_at`), so a revoked token can never be issued or resolve again.
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    conversation = models.ForeignKey("chat.Conversation", on_delete=models.CASCADE, related_name="shares")
    # token_models.key_digest of the link's token (secrets.token_urlsafe(24): 192 random bits, the only
    # credential of the public page), as API tokens are kept: a copy of the database opens no link.
    # (Links made before the digests had their token stored here; a data migration digested them.)
    digest = models.CharField(max_length=64)
    # The title when shared: a later rename is not published.
    title = models.CharField(max_length=200)
    # The newest message id at share time (0: the conversation was empty).
    through_message_id = models.BigIntegerField()
    # Replies of the snapshot that were not shown when it was made but may yet be, in the same row: one
    # the orphan sweep took for dead (interrupted) whose stalled stream then finishes or is stopped,
    # or one still streaming below the tail. Kept out of the page, as the owner saw them. Null: none
    # (and every link made before migration 0022). Nullable with no default: no table rewrite.
    hidden_ids = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # Settings and GET /api/shares/: the owner's live links, newest first, the id breaking ties
            # (share_list's order); the API's next page seeks its cursor (time and id) here, a range scan.
            models.Index(
                fields=["owner", "-created_at", "-id"], condition=Q(revoked_at__isnull=True),
                name="share_owner_live_id_idx",
            ),
        ]
        constraints = [
            # Public page /s/<token>/: the share by its token's digest, one unique-index seek per view.
            models.UniqueConstraint(fields=["digest"], name="share_digest_uniq"),
        ]

    def __str__(self) -> str:
        return f"share #{self.pk} of conversation {self.conversation_id}"
