"""A send's idempotency key that cannot be stored is refused in words about the key, not the message:
"The message contains a NUL character" sent an integrator looking for it in a text that had none."""

from __future__ import annotations

import pytest

from chatapp.chat.models import Conversation, Message

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("key", ["a\\u0000b", "\\ud800"])  # JSON escapes: the body itself is valid UTF-8
def test_a_key_that_cannot_be_stored_is_refused_naming_the_key(api, user, key):
    chat = Conversation.objects.create(owner=user, title="Keys", offline=True)

    refused = api.post(f"/api/conversations/{chat.pk}/messages/", f'{{"content": "hello", "client_key": "{key}"}}',
                       content_type="application/json")

    assert refused.status_code == 400
    words = refused.json()["client_key"][0]
    assert words.startswith("The client key contains") and "message" not in words
    assert not Message.objects.filter(conversation=chat).exists()
