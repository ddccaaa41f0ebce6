"""Pages of read-only share links (issue 13): the public snapshot `/s/<token>/`, readable without an
account, and Settings' Revoke button. Thin function views, as in views.py.

The public page shows the conversation's text and nothing of its owner: no username, model, config,
settings, key, nor the names of the files its images came from, and its images are served without their
metadata (image_metadata: a photo's GPS position, camera, author). It has no script, and its CSP
(SHARE_CSP, stricter than the app's pages' views.PAGE_CSP) lets none run, nor any form post or
connection start; it keeps search engines out (`noindex` meta and X-Robots-Tag), sends no Referer to
the sites its links lead to, and is never cached, so a revoked link stops answering at once (404, as an
unknown token).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.db.models import prefetch_related_objects
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from chatapp.chat.api.image_views import image_response
from chatapp.chat.image_metadata import image_metadata_strip
from chatapp.chat.image_services import images_prefetch
from chatapp.chat.models import Message, MessageImage
from chatapp.chat.query_params import query_id
from chatapp.chat.rendering import markdown_render
from chatapp.chat.share_selectors import share_get, share_get_public, share_image_get, share_messages
from chatapp.chat.share_services import conversation_share_revoke

PUBLIC_HEADERS = {"X-Robots-Tag": "noindex, nofollow", "Referrer-Policy": "no-referrer"}
# The public page's policy: its own stylesheets and images (and the inline style of its icons' sprite),
# nothing else. No script at all: the page has none, so text that ever got past the sanitizer as markup
# could run none either (not even one of the app's own modules, which `script-src 'self'` would allow).
SHARE_CSP = (
    "default-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)


@dataclass(frozen=True)
class SharedMessage:
    """One message as the public page shows it."""

    pk: int
    role: str
    # The user's text is shown as typed (the template escapes it), as in the chat; a reply is the
    # chat's sanitized markdown (rendering.markdown_render), the only HTML marked safe.
    text: str
    html: str
    stopped: bool
    cut: bool  # ended by the model's output limit (finish_reason "length"): it stops mid-sentence
    images: list[MessageImage]  # a user message's, read through the link (share_image)


def _public(response: HttpResponse) -> HttpResponse:
    for name, value in PUBLIC_HEADERS.items():
        response[name] = value
    if response.get("Content-Type", "").startswith("text/html"):
        response["Content-Security-Policy"] = SHARE_CSP
    return response


def _shared(message: Message) -> SharedMessage:
    is_user = message.role == Message.Role.USER
    return SharedMessage(
        pk=message.pk,
        role=message.role,
        text=message.content if is_user else "",
        html="" if is_user else markdown_render(message.content),
        stopped=message.status == Message.Status.STOPPED,
        cut=message.cut_at_output_limit,
        images=list(message.images.all()) if is_user and getattr(message, "has_images", False) else [],
    )


@never_cache
@require_GET
def share_page(request: HttpRequest, token: str) -> HttpResponse:
    """The snapshot, SHARE_PAGE messages a page from the start; `?after=<id>` continues."""
    try:
        share = share_get_public(token=token)
    except Http404:
        return _public(render(request, "chat/share_missing.html", status=404))
    after = request.GET.get("after", "")
    after_id = query_id(after)
    page = share_messages(share=share, after_id=after_id)
    prefetch_related_objects([m for m in page.messages if getattr(m, "has_images", False)], images_prefetch())
    context = {
        "share": share,
        # The page's own links (continue, from the start) carry the token it was opened by: only its
        # digest is stored.
        "token": token,
        "shared_messages": [_shared(m) for m in page.messages],
        "next_after": page.next_after,
        "continued": after_id is not None,
    }
    return _public(render(request, "chat/share.html", context))


@never_cache
@require_GET
def share_image(request: HttpRequest, token: str, pk: int) -> HttpResponse:
    """An image of a message the link shows, read through its token: 404 once the link is revoked (no
    copy is kept: `no-store`), for an unknown token, and for an image the link does not show."""
    try:
        share = share_get_public(token=token)
        image = share_image_get(share=share, pk=pk)
    except Http404:
        return _public(HttpResponse("Not found.", status=404, content_type="text/plain; charset=utf-8"))
    # Without its metadata: what the owner shared is the picture, not where and with what it was taken.
    served = image_metadata_strip(bytes(image.data), image.mime)
    return _public(image_response(image, cache_control="no-store", data=served))


@login_required
@require_POST
def share_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    owner = cast(User, request.user)  # login_required
    share = share_get(owner=owner, pk=pk)
    conversation_share_revoke(owner=owner, share=share)
    flash.success(request, f"Link to “{share.title}” revoked: it no longer opens.")
    return redirect(reverse("settings") + "#shares-h")
