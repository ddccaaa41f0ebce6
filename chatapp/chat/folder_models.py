"""Chat folders: a user's named groups of chats in the sidebar (Open WebUI's folders, ChatGPT's
projects). A chat is in at most one (Conversation.folder); a folder deleted, its chats are back in the
main list. Registered through models.py."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models.functions import Lower

FOLDER_NAME_MAX_CHARS = 80


class Folder(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="chat_folders")
    name = models.CharField(max_length=FOLDER_NAME_MAX_CHARS)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            # One folder per name and user, whatever the case ("Work" and "work" would look one in the
            # sidebar). Its index (owner, lower(name)) also serves the reads of a user's folders
            # (folder_selectors.folder_list, folder_services' clash check).
            models.UniqueConstraint("owner", Lower("name"), name="folder_owner_name_ci_uniq"),
            models.CheckConstraint(condition=~models.Q(name=""), name="folder_name_not_blank"),
        ]

    def __str__(self) -> str:
        return self.name
