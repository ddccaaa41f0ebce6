"""What the server-rendered pages show is the product's text, never the template's own syntax.

Django ends a `{# … #}` comment at the line's end: one written over two lines is printed as text.
One such comment in the user message's image block stood under every user message of every chat
page and share page for three sessions before anyone looked at a reloaded chat.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from chatapp.chat.models import Conversation, Message
from chatapp.chat.share_services import conversation_share_create

pytestmark = pytest.mark.django_db

# What only a template's source holds (not `{{`: a saved prompt's variables are written so, and
# Settings says how); none of it is in the messages below.
TEMPLATE_SYNTAX = ("{#", "#}", "{%", "%}")


@pytest.fixture
def chat(user):
    conversation = Conversation.objects.create(owner=user, title="Trip planning")
    asked = Message.objects.create(conversation=conversation, role=Message.Role.USER, content="Where should we go?")
    Message.objects.create(conversation=conversation, role=Message.Role.ASSISTANT, content="**Lisbon**, in March.",
                           reply_to=asked, parent=asked)
    return conversation


def _leaks(body: str) -> list[str]:
    return [mark for mark in TEMPLATE_SYNTAX if mark in body]


def test_the_pages_of_a_chat_show_no_template_syntax(client, user, chat):
    client.force_login(user)
    for path in ("/", f"/c/{chat.pk}/", f"/c/{chat.pk}/dashboard/", "/dashboard/", "/settings/"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert _leaks(response.content.decode()) == [], path


def test_a_share_page_shows_no_template_syntax(user, chat):
    issued = conversation_share_create(owner=user, conversation=chat)
    response = Client().get(f"/s/{issued.token}/")
    assert response.status_code == 200
    body = response.content.decode()
    assert "Where should we go?" in body
    assert _leaks(body) == []


def test_every_template_comment_ends_on_its_own_line():
    """The rule behind the two tests above, for the templates no test renders with every branch taken."""
    open_across_lines = []
    for template in Path(settings.BASE_DIR, "templates").rglob("*.html"):
        for number, line in enumerate(template.read_text(encoding="utf-8").splitlines(), start=1):
            start = line.find("{#")
            while start != -1:
                end = line.find("#}", start + 2)
                if end == -1:
                    open_across_lines.append(f"{template.name}:{number}")
                    break
                start = line.find("{#", end + 2)
    assert open_across_lines == []
