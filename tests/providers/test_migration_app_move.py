"""LLMConfig moved from the `chat` app to `providers` (issue 10): a database made by the release
before the move migrates forward with every row and every reference to it kept, and back."""

from __future__ import annotations

import pytest

from tests.support.migrations import (
    assert_content_type_moved,
    content_types_before_move,
    latest,
    migrate_to,
    migrated_to,
)

BEFORE = [("chat", "0015_message_indexes"), ("providers", None)]
CONFIG_FIELDS = ("id", "owner_id", "name", "base_url", "model", "api_key_encrypted", "context_window", "is_default")


@pytest.mark.django_db(transaction=True)
def test_the_model_configs_move_to_their_app_with_every_row_and_reference():
    with migrated_to(BEFORE) as apps:
        User = apps.get_model("auth", "User")
        Config = apps.get_model("chat", "LLMConfig")
        Conversation = apps.get_model("chat", "Conversation")
        Settings = apps.get_model("chat", "UserSettings")
        content_types_before_move(app="providers", model="llmconfig")
        owner = User.objects.create(username="before-the-move")
        configs = [
            Config.objects.create(owner=owner, name=f"model {i}", base_url=f"https://llm{i}.example/v1",
                                  model=f"gpt-{i}", api_key_encrypted=f"token-{i}", context_window=8000 + i,
                                  max_output_tokens=1000, is_default=i == 0)
            for i in range(3)
        ]
        chat = Conversation.objects.create(owner=owner, title="uses model 1", llm_config=configs[1])
        Settings.objects.create(user=owner, summary_config=configs[2])
        rows = sorted(Config.objects.values_list(*CONFIG_FIELDS))

        apps = migrate_to(latest())
        assert sorted(apps.get_model("providers", "LLMConfig").objects.values_list(*CONFIG_FIELDS)) == rows
        moved_chat = apps.get_model("chat", "Conversation").objects.get(pk=chat.pk)
        assert moved_chat.llm_config.name == "model 1"
        assert apps.get_model("chat", "UserSettings").objects.get(user_id=owner.pk).summary_config.name == "model 2"
        assert_content_type_moved(app="providers", model="llmconfig")

        # And back: the release before the move reads the same rows.
        apps = migrate_to(BEFORE)
        assert sorted(apps.get_model("chat", "LLMConfig").objects.values_list(*CONFIG_FIELDS)) == rows

    # The app's own model (what the services use) reads the moved rows, and deleting a config still
    # empties the references to it (the database's foreign keys were never touched).
    from chatapp.chat.models import Conversation as LiveConversation
    from chatapp.providers.models import LLMConfig

    assert sorted(LLMConfig.objects.values_list(*CONFIG_FIELDS)) == rows
    LLMConfig.objects.filter(name="model 1").delete()
    assert LiveConversation.objects.get(pk=chat.pk).llm_config_id is None
