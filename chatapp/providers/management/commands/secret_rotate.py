"""`manage.py secret_rotate`: the step of a FIELD_ENCRYPTION_KEY rotation between adding the new key
(first in the list) and removing the old one: every stored API key is encrypted again under the first
key. Without it, removing the old key makes every key not saved since unreadable."""

from django.core.management.base import BaseCommand

from chatapp.providers.services import llm_config_keys_rotate


class Command(BaseCommand):
    help = "Encrypt every stored API key again under the first FIELD_ENCRYPTION_KEY (key rotation)."

    def handle(self, *args, **options) -> None:
        rotated, unreadable = llm_config_keys_rotate()
        self.stdout.write(f"{rotated} API keys encrypted under the first FIELD_ENCRYPTION_KEY.")
        if unreadable:
            self.stderr.write(
                f"{unreadable} API keys could not be read with any configured key and were left as they are: "
                "their owners enter them again in Settings."
            )
