from django.apps import AppConfig


class ProvidersConfig(AppConfig):
    """Model providers: the endpoints users configure (LLMConfig), their keys' encryption, the
    SSRF guard on their addresses, and the client that calls them (llm/: calls, errors, provider
    quirks, the offline demo model)."""

    name = "chatapp.providers"
    label = "providers"
    default_auto_field = "django.db.models.BigAutoField"
