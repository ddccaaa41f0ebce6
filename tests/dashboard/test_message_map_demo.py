"""The message map of a chat that began on the offline demo model and went on with a real one."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from chatapp.chat.models import Conversation, Message
from tests.support.chat import make_config, send

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("no_rate_limit")]


def test_the_demo_models_reply_is_never_sent_and_the_map_says_so(user, fake_openai, client):
    fake_openai.reset()
    conversation = Conversation.objects.create(owner=user, offline=True)
    assert send(user, conversation, "Hello, what can you do?").names[-1] == "done"
    demo_reply = Message.objects.get(conversation=conversation, role="assistant")
    config = make_config(user, fake_openai.base_url, model="gpt-4o-mini")
    api = APIClient()
    api.force_authenticate(user)
    switched = api.patch(f"/api/conversations/{conversation.pk}/", {"llm_config": config.pk}, format="json")
    assert switched.status_code == 200
    assert send(user, conversation, "Which tent for a windy ridge?").names[-1] == "done"
    # The real model was not sent the demo's reply (it is never history for a real model).
    sent = fake_openai.completions[-1].messages
    assert not any("offline" in str(m["content"]).lower() for m in sent), sent

    client.force_login(user)
    mp = client.get(f"/api/dashboard/conversations/{conversation.pk}/map/").json()
    ids = [start + k for start, length in mp["id_runs"] for k in range(length)]
    statuses = [mp["statuses"][code] for code, length in mp["status_runs"] for _ in range(length)]
    status = dict(zip(ids, statuses, strict=True))
    # "Never sent", not "Not sent: older than the window and not accounted for by the record (old records)".
    assert status[demo_reply.pk] == "excluded", status
