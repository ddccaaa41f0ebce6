from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "chatapp.chat"
    label = "chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from chatapp.providers.model_moves import chats_model_moved

        from . import checks  # noqa: F401  (registers the system checks)
        from .services import conversations_model_moved

        chats_model_moved.connect(conversations_model_moved, dispatch_uid="chat.conversations_model_moved")
