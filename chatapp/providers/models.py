"""A user's model endpoints: an OpenAI-compatible base URL, a model, its window and output budget,
and the API key, encrypted at rest (crypto.py) and never returned."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

import optimizer

from .ollama import ollama_window_note


class LLMConfig(models.Model):
    class WindowSource(models.TextChoices):
        REGISTRY = "registry", "Model registry"
        USER = "user", "Set by you"
        DEFAULT = "default", "Default (model unknown)"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="llm_configs")
    name = models.CharField(max_length=100)
    base_url = models.URLField(max_length=500)
    model = models.CharField(max_length=200)
    # Fernet token of the API key (chatapp.providers.crypto); never returned by any page or API.
    api_key_encrypted = models.TextField(blank=True, default="")
    api_key_last4 = models.CharField(max_length=4, blank=True, default="")
    context_window = models.PositiveIntegerField()
    context_window_source = models.CharField(
        max_length=16, choices=WindowSource.choices, default=WindowSource.DEFAULT
    )
    max_output_tokens = models.PositiveIntegerField(default=2000)
    temperature = models.FloatField(default=0.7)
    is_default = models.BooleanField(default=False)
    # Whether the model is sent a message's images (else a "[image: WxH]" placeholder). Null: as the
    # model registry says (litellm's supports_vision), off for a model it does not know.
    accepts_images = models.BooleanField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        # The table keeps the name it had in the chat app: the model moved here by a state-only
        # migration (since squashed), no row copied.
        db_table = "chat_llmconfig"
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner"], condition=Q(is_default=True), name="llmconfig_one_default_per_owner"
            ),
            models.UniqueConstraint(fields=["owner", "name"], name="llmconfig_unique_name_per_owner"),
            models.CheckConstraint(
                condition=Q(context_window__gt=models.F("max_output_tokens")),
                name="llmconfig_window_exceeds_output",
            ),
            models.CheckConstraint(
                condition=Q(temperature__gte=0) & Q(temperature__lte=2), name="llmconfig_temperature_range"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.model})"

    @property
    def window_note(self) -> str:
        """Where its endpoint's window comes from when it is not the model's (an Ollama server's)."""
        return ollama_window_note(self.base_url)

    @property
    def sees_images(self) -> bool:
        """The user's word on images, else the registry's (for the model at this endpoint), else no."""
        if self.accepts_images is not None:
            return self.accepts_images
        info = optimizer.model_info(self.model, provider=optimizer.provider_for_base_url(self.base_url))
        return bool(info and info.supports_vision)

    @property
    def has_api_key(self) -> bool:
        return bool(self.api_key_encrypted)
