"""Writes for read-only share links (issue 13): make a link of a conversation as it is now, revoke one.

A link is a snapshot: it shows the active path up to its last message at share time
(ConversationShare.through_message_id) and nothing else, so nothing said later, and nothing of another
branch (an edited-away message, one switched to later), is published. Several live links per
conversation are allowed, each its own snapshot, listed and revoked one by one in Settings. Only a
digest of a link's token is stored (as of an API token's key), so the link is shown once, when it is
made: sharing again makes a new link, even of the same snapshot, since the first cannot be shown again.
"""

from __future__ import annotations

import secrets
from typing import NamedTuple

from django.contrib.auth.models import User
from django.db import transaction
from django.http import Http404
from django.utils import timezone

from .models import Conversation, ConversationShare
from .share_selectors import share_snapshot_hidden, share_snapshot_tail
from .token_models import key_digest

# 24 random bytes (192 bits) in URL-safe base64: 32 characters, not guessable, so the token alone is
# the credential and a collision on the unique index is not worth retrying for.
TOKEN_BYTES = 24


class IssuedShare(NamedTuple):
    share: ConversationShare
    token: str  # the link's credential (/s/<token>/), shown to the user once; only its digest is stored


def conversation_share_create(*, owner: User, conversation: Conversation) -> IssuedShare:
    """A new link of `conversation` as it is now, its token returned this once."""
    if conversation.owner_id != owner.pk:
        # Callers look the conversation up scoped to its owner; this guards a caller that did not.
        raise Http404("No such conversation.")
    with transaction.atomic():
        # The chat's row first: deleted in another tab since the request found it, the link's row would
        # point at nothing and fail its commit (a 500); it is the 404 of a chat that never was.
        if not Conversation.objects.select_for_update().filter(pk=conversation.pk).values_list("pk", flat=True):
            raise Http404("No Conversation matches the given query.")
        return _share_of_now(owner=owner, conversation=conversation)


def _share_of_now(*, owner: User, conversation: Conversation) -> IssuedShare:
    # The active path's last message (not a reply still streaming): the snapshot is the path up to it
    # (its ancestors), so a later switch to another branch changes nothing the link shows
    # (share_selectors.share_messages), nor does the end of a reply under way.
    through = share_snapshot_tail(conversation_id=conversation.pk) or 0
    # Nor does the end of an older reply that was unfinished now: it stays out, as the owner saw it.
    hidden = share_snapshot_hidden(conversation_id=conversation.pk, through_message_id=through)
    token = secrets.token_urlsafe(TOKEN_BYTES)
    share = ConversationShare.objects.create(
        owner=owner,
        conversation=conversation,
        digest=key_digest(token),
        title=conversation.title,
        through_message_id=through,
        hidden_ids=hidden,
    )
    return IssuedShare(share=share, token=token)


def conversation_share_revoke(*, owner: User, share: ConversationShare) -> None:
    """The link stops working at once (its page answers 404); the row stays, marked revoked."""
    if share.owner_id != owner.pk:
        raise Http404("No such share.")
    now = timezone.now()
    # Conditional: revoking twice (two tabs) keeps the first time.
    ConversationShare.objects.filter(pk=share.pk, revoked_at__isnull=True).update(revoked_at=now)
    share.revoked_at = share.revoked_at or now
