"""Saved prompts: text a user keeps to start messages with, inserted by typing its command after "/"
in the message box (Settings → Prompts, `/api/prompts/`). Registered through models.py."""

from __future__ import annotations

from django.conf import settings
from django.db import models

# A command: lowercase letters, digits, "-" and "_", starting with a letter or digit (so "/" then the
# command, typed, is one word the box can match as it is typed).
COMMAND_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,39}$"


class SavedPrompt(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_prompts")
    command = models.CharField(max_length=40)
    title = models.CharField(max_length=100)
    content = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            # One prompt per command and user; its index serves the list by command (Settings, the box's
            # "/" menu) and the lookup of one.
            models.UniqueConstraint(fields=["owner", "command"], name="prompt_owner_command_uniq"),
            models.CheckConstraint(condition=models.Q(command__regex=COMMAND_PATTERN), name="prompt_command_valid"),
        ]

    def __str__(self) -> str:
        return f"/{self.command}"
