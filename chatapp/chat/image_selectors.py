"""Reads of message images: one of the requester's, with its bytes, for the image endpoint."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.shortcuts import get_object_or_404

from chatapp.chat.image_models import MessageImage


def image_get(*, owner: AbstractBaseUser | AnonymousUser, pk: int) -> MessageImage:
    """The image `pk` of one of `owner`'s chats, or Http404 (another user's is as missing as none)."""
    return get_object_or_404(MessageImage, pk=pk, message__conversation__owner=owner)
