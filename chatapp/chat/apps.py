from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "chatapp.chat"
    label = "chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
