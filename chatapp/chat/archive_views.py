"""Settings → Archived chats: bring one back, delete one, archive or bring back all. Plain form POSTs
that redirect to the section (the sidebar's Archive button uses the API: PATCH {archived})."""

from __future__ import annotations

from typing import cast

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from chatapp.chat import selectors, services

# Settings lists the latest archived chats; the rest are counted (a search in the sidebar finds any).
ARCHIVED_SHOWN = 100


# The change made, told to the browser's other tabs by the page the post leads to (settings.html,
# common.js's tellTabs) as the API call making it would tell them: their sidebars are drawn again, and a
# tab showing a chat deleted here says so. A form post is no fetch of common.js's api(), which tells them.
TABS_TOLD = "tabs_told"


def _back(request: HttpRequest, *, method: str, path: str) -> HttpResponse:
    request.session[TABS_TOLD] = {"method": method, "path": path}
    return redirect(reverse("settings") + "#archived-h")


def tabs_told(request: HttpRequest) -> dict | None:
    """The change a post of this section made, once (settings.html tells the other tabs of it)."""
    return request.session.pop(TABS_TOLD, None)


def archived_context(*, owner: User) -> dict:
    """What Settings' section (chat/_archived.html) shows."""
    archived = selectors.conversation_archived_list(owner=owner)
    shown = list(archived[:ARCHIVED_SHOWN])
    return {
        "archived": shown,
        "archived_more": archived.count() - len(shown) if len(shown) == ARCHIVED_SHOWN else 0,
        "unarchived_any": selectors.conversation_list(owner=owner, archived=False).exists(),
    }


@login_required
@require_POST
def archived_restore(request: HttpRequest, pk: int) -> HttpResponse:
    conversation = selectors.conversation_get(owner=cast(User, request.user), pk=pk)
    services.conversation_archive_set(conversation=conversation, archived=False)
    flash.success(request, f"“{conversation.title}” is back in the sidebar.")
    return _back(request, method="PATCH", path=f"/api/conversations/{pk}/")


@login_required
@require_POST
def archived_delete(request: HttpRequest, pk: int) -> HttpResponse:
    conversation = selectors.conversation_get(owner=cast(User, request.user), pk=pk)
    services.conversation_delete(conversation=conversation)
    flash.success(request, f"“{conversation.title}” deleted.")
    return _back(request, method="DELETE", path=f"/api/conversations/{pk}/")


@login_required
@require_POST
def archived_all(request: HttpRequest) -> HttpResponse:
    """`archived=1`: archive every chat; `archived=0`: bring every archived chat back."""
    archived = request.POST.get("archived") == "1"
    changed = services.conversation_archive_all(owner=cast(User, request.user), archived=archived)
    chats = f"{changed} chat{'' if changed == 1 else 's'}"
    flash.success(request, f"{chats} archived." if archived else f"{chats} back in the sidebar.")
    return _back(request, method="PATCH", path="/api/conversations/")
