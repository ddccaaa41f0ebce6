"""Images attached to a user's message (for models that see images). Registered through models.py.

The bytes are kept in the database with the message, as its text is: a backup, an export or a
deleted account takes them along, and no file store needs configuring. The type and size are read
from the bytes (optimizer.images), never taken from the client.
"""

from __future__ import annotations

from django.db import models

IMAGE_NAME_MAX_CHARS = 200


class MessageImage(models.Model):
    # Owner-scoped through the message's conversation, as every message is.
    message = models.ForeignKey("chat.Message", on_delete=models.CASCADE, related_name="images")
    mime = models.CharField(max_length=32)
    width = models.PositiveIntegerField()
    height = models.PositiveIntegerField()
    byte_count = models.PositiveIntegerField()
    # The file's name as the sender's computer named it ("" when pasted): exports say it.
    name = models.CharField(max_length=IMAGE_NAME_MAX_CHARS, blank=True, default="")
    data = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.mime} {self.width}x{self.height}"
