"""Pages: accounts and the chat. Thin function views — reads via selectors, writes via services.

The chat page is rendered on the server (messages as sanitized markdown); the browser then talks to
the JSON/SSE API for sending, streaming, pins, renames and the context gauge. Settings pages:
settings_views.py.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib import admin
from django.contrib.auth import update_session_auth_hash
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.db.models import prefetch_related_objects
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import cache_control, never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_GET, require_http_methods

from chatapp.chat import selectors, services
from chatapp.chat.branch_selectors import message_sibling_places
from chatapp.chat.context import first_user_message_id
from chatapp.chat.forms import LoginForm, ThrottledPasswordChangeForm, form_errors_focused
from chatapp.chat.image_models import MessageImage
from chatapp.chat.image_services import images_prefetch
from chatapp.chat.layout import Place, message_place_get
from chatapp.chat.models import Conversation, Message
from chatapp.chat.query_params import query_id
from chatapp.chat.rendering import code_style_css, markdown_render
from chatapp.chat.search_match import MAX_QUERY_CHARS
from chatapp.chat.search_selectors import SearchHit, message_search
from chatapp.chat.sidebar import SIDEBAR_LIMIT, sidebar_conversations, sidebar_limit, sidebar_lists
from chatapp.chat.summary_selectors import summary_kept_pins
from chatapp.chat.title_services import title_pending
from chatapp.providers import selectors as config_selectors
from chatapp.providers.models import LLMConfig

# Defence in depth behind the sanitizer: pages run only the app's own script files (no inline script,
# no event-handler attributes), so even markup that slipped through could not execute; and they load
# no remote image, whose URL could carry chat text away (markdown images render as links).
PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


TIMELINE_PAGE = 100


OFFLINE_LABEL = "Offline demo model"


def page_csp(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Adds the pages' Content-Security-Policy header (see PAGE_CSP)."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        response = view(request, *args, **kwargs)
        response.setdefault("Content-Security-Policy", PAGE_CSP)
        return response

    return wrapped


def form_page(request: HttpRequest, template: str, form: Any, *, wait: int) -> HttpResponse:
    """A page of one form; past a failed sign-in or sign-up limit (`wait` seconds, the form saying so),
    a 429 with Retry-After."""
    form_errors_focused(form)
    response = render(request, template, {"form": form}, status=429 if wait else 200)
    if wait:
        response["Retry-After"] = str(wait)
    return response


@dataclass(frozen=True)
class MessageView:
    """What the timeline template needs for one message."""

    message: Message
    html: str
    # The message's place in the context (optimizer.layout.message_place); None: never sent as itself.
    place: Place | None
    is_last_reply: bool
    # Issue 13 (branches): 1-based position among the messages sharing its parent, and how many there are.
    sibling_index: int = 1
    sibling_count: int = 1
    # A user message's images (MessageImage, bytes deferred); none for every other message.
    images: Sequence[MessageImage] = ()

    @property
    def is_summary(self) -> bool:
        return self.message.kind == Message.Kind.SUMMARY


class LoginView(auth_views.LoginView):
    """Django's login page with the failed sign-in limits (forms.LoginForm): 429 and Retry-After."""

    form_class = LoginForm
    redirect_authenticated_user = True

    def setup(self, request: HttpRequest, *args, **kwargs) -> None:
        super().setup(request, *args, **kwargs)
        # The admin sends an account it refuses (not staff) here: sent back to `next`, it came here again,
        # until the browser gave up. It gets the form instead, saying why (login.html).
        self.admin_refused = request.user.is_authenticated and not admin.site.has_permission(request) and (
            self.get_redirect_url().startswith(reverse("admin:index")))
        self.redirect_authenticated_user = not self.admin_refused

    def get_redirect_url(self) -> str:
        url = super().get_redirect_url()  # this page itself: Django's loop check raised, a server error
        return "" if url == self.request.path else url

    def form_invalid(self, form: LoginForm) -> HttpResponse:
        form_errors_focused(form)
        response = super().form_invalid(form)
        if form.wait:
            response.status_code = 429
            response["Retry-After"] = str(form.wait)
        return response


# Set by password_change for the page it redirects to, which pops it: the revoked token is said there
# once, in the page itself (a toast would be gone before a script's owner read it).
REVOKED_NOTE_SESSION_KEY = "password_change_revoked_token"


# As Django's PasswordChangeView: the passwords kept out of error reports, the form never cached.
@sensitive_post_parameters()
@never_cache
@page_csp
@login_required
@require_http_methods(["GET", "POST"])
def password_change(request: HttpRequest) -> HttpResponse:
    form = ThrottledPasswordChangeForm(request.user, request.POST if request.method == "POST" else None,
                                       request=request)
    if form.is_valid():
        revoked = services.user_password_change(user=request.user, password=form.cleaned_data["new_password1"])
        # The password's hash is in every session: this one is brought up to date, the others end.
        update_session_auth_hash(request, request.user)
        request.session[REVOKED_NOTE_SESSION_KEY] = revoked
        return redirect("password-changed")
    return form_page(request, "registration/password_change.html", form, wait=form.wait)


@page_csp
@login_required
@require_GET
def password_changed(request: HttpRequest) -> HttpResponse:
    revoked = request.session.pop(REVOKED_NOTE_SESSION_KEY, 0)
    return render(request, "registration/password_changed.html", {"tokens_revoked": int(revoked or 0)})


def user_configs(user) -> list[LLMConfig]:
    return list(config_selectors.llm_config_list(owner=user))


def _effective_config(*, conversation: Conversation | None, configs: list[LLMConfig]) -> LLMConfig | None:
    # As conversation_config: an offline chat stays offline; a deleted config falls back to the default.
    if conversation is not None and conversation.offline:
        return None
    if conversation is not None and conversation.llm_config_id:
        for config in configs:
            if config.pk == conversation.llm_config_id:
                return config
    return next((c for c in configs if c.is_default), None)


def _message_views(*, conversation: Conversation, items: list[Message], newest_page: bool) -> list[MessageView]:
    window_start = conversation.window_start_id
    last_reply_id = None
    if newest_page:
        for m in reversed(items):
            if m.role == Message.Role.ASSISTANT:  # the timeline lists the active path only
                last_reply_id = m.pk
                break
            if m.role == Message.Role.USER:
                break
    first_user_id = first_user_message_id(conversation=conversation)
    kept_ids = summary_kept_pins(conversation=conversation)
    siblings = message_sibling_places(messages=items)
    # The user messages' images in one query; none in a chat that never held one (most chats).
    users = [m for m in items if m.role == Message.Role.USER] if conversation.has_images else []
    prefetch_related_objects(users, images_prefetch())
    views = []
    for m in items:
        # User text is shown as typed (escaped by the template); model and summary text is markdown.
        html = "" if m.role == Message.Role.USER else markdown_render(m.content)
        views.append(
            MessageView(
                message=m,
                html=html,
                place=message_place_get(message=m, first_user_id=first_user_id, window_start_id=window_start,
                                        kept_ids=kept_ids),
                is_last_reply=m.pk == last_reply_id,
                sibling_index=siblings.get(m.pk, (1, 1))[0],
                sibling_count=siblings.get(m.pk, (1, 1))[1],
                images=list(m.images.all()) if conversation.has_images and m.role == Message.Role.USER else (),
            )
        )
    return views


def _search_text(request: HttpRequest) -> str:
    """The search box's text, up to MAX_QUERY_CHARS (as the box takes it). A NUL cannot match stored
    text and PostgreSQL refuses it as a parameter (a 500): it is read as a space."""
    return request.GET.get("q", "")[:MAX_QUERY_CHARS].replace("\x00", " ").strip()


def _chat_context(request: HttpRequest, *, conversation: Conversation | None) -> dict:
    query = _search_text(request)
    configs = user_configs(request.user)
    config = _effective_config(conversation=conversation, configs=configs)
    ctx = {
        **sidebar_lists(owner=request.user, conversations=sidebar_conversations(owner=request.user, query=query),
                        query=query, limit=SIDEBAR_LIMIT),
        "conversation": conversation,
        "query": query,
        "max_query_chars": MAX_QUERY_CHARS,
        "config": config,
        "configs": configs,
        "offline": config is None,
        "model_label": OFFLINE_LABEL if config is None else config.name,
        "max_message_chars": settings.MAX_MESSAGE_CHARS,
        "max_image_bytes": settings.MAX_IMAGE_BYTES,
        "max_images": settings.MAX_IMAGES_PER_MESSAGE,
        "message_views": [],
        "has_earlier": False,
    }
    if conversation is not None:
        items = list(selectors.message_list(conversation=conversation, limit=TIMELINE_PAGE + 1))
        has_earlier = len(items) > TIMELINE_PAGE
        items = items[-TIMELINE_PAGE:]
        ctx["message_views"] = _message_views(conversation=conversation, items=items, newest_page=True)
        ctx["has_earlier"] = has_earlier
        ctx["oldest_id"] = items[0].pk if items else None
        ctx["title_pending"] = title_pending(conversation=conversation)
        ctx["reply_coming"] = selectors.reply_coming(conversation=conversation, tail=items[-1] if items else None)
    return ctx


# The chat pages show a user's history: never_cache keeps them out of the browser's back-forward
# cache too, so Back after signing out (a shared computer) asks the server, which signs in first.
@never_cache
@page_csp
@login_required
@require_GET
def chat_new(request: HttpRequest) -> HttpResponse:
    """A new chat, at `/` too (as Open WebUI and ChatGPT open one there): the conversation is made by
    its first message, and the earlier ones are a click away in the sidebar. `/` used to reopen the
    newest conversation, where a message typed on arrival went on with a chat it had nothing to do with."""
    return render(request, "chat/chat.html", _chat_context(request, conversation=None))


@never_cache
@page_csp
@login_required
@require_GET
def chat_detail(request: HttpRequest, pk: int) -> HttpResponse:
    conversation = selectors.conversation_get(owner=request.user, pk=pk)
    return render(request, "chat/chat.html", _chat_context(request, conversation=conversation))


@page_csp  # a fragment opened as a page (its URL typed in) gets the pages' policy too
@login_required
@require_GET
def chat_messages_before(request: HttpRequest, pk: int) -> HttpResponse:
    """An HTML fragment of older messages, for "Load earlier messages" (`before=<id>`; none: the newest
    page, the one the chat opens at); with `after=<id>`, the newer ones, for "Load newer messages" (the
    page keeps a bounded run of messages, window.js); with `since=<id>` instead, the messages from that
    one on (a page following a reply that streams in another tab)."""
    conversation = selectors.conversation_get(owner=request.user, pk=pk)
    if "since" in request.GET:
        try:
            since = int(request.GET["since"])
        except ValueError:
            raise Http404("since=<message id>") from None
        items = selectors.message_list_since(conversation=conversation, since_id=since, limit=TIMELINE_PAGE)
        return _messages_fragment(request, conversation=conversation, items=items, newest_page=True)
    try:
        before = int(request.GET["before"]) if "before" in request.GET else None
        after = int(request.GET["after"]) if "after" in request.GET else None
        # `limit`: another page size, up to the largest the selector gives less the one row more that tells
        # whether any are left. The chat's own pages ask for none: a link far up reads two pages (window.js).
        page = max(1, min(int(request.GET.get("limit", TIMELINE_PAGE)), selectors.MESSAGE_PAGE_MAX - 1))
    except ValueError:
        raise Http404("before=<message id> or after=<message id>, limit=<count>: optional") from None
    if after is not None:
        items = selectors.message_list_since(conversation=conversation, since_id=after + 1, limit=page + 1)
        has_newer = len(items) > page
        items = items[:page]
        # Regenerate on the last reply only when this page is the chat's end, as on the page first drawn.
        response = _messages_fragment(request, conversation=conversation, items=items, newest_page=not has_newer)
        response["X-Has-Newer"] = "1" if has_newer else "0"
        response["X-Newest-Id"] = str(items[-1].pk) if items else ""
        return response
    items = list(selectors.message_list(conversation=conversation, before_id=before, limit=page + 1))
    has_earlier = len(items) > page
    items = items[-page:]
    response = _messages_fragment(request, conversation=conversation, items=items, newest_page=before is None)
    response["X-Has-Earlier"] = "1" if has_earlier else "0"
    response["X-Oldest-Id"] = str(items[0].pk) if items else ""
    return response


def _messages_fragment(request: HttpRequest, *, conversation: Conversation, items: list[Message],
                       newest_page: bool) -> HttpResponse:
    views = _message_views(conversation=conversation, items=items, newest_page=newest_page)
    return render(request, "chat/_messages.html", {"conversation": conversation, "message_views": views})


@page_csp  # a fragment opened as a page (its URL typed in) gets the pages' policy too
@login_required
@require_GET
def chat_sidebar(request: HttpRequest) -> HttpResponse:
    """The conversation list as an HTML fragment (search as you type).

    With a query, the conversations holding the best hits (search_selectors.message_search, page 1:
    title hits, then messages by rank) come first under "Best matches", each with up to three of its
    matching messages as snippets that link to the message; the other matching conversations follow
    by last activity, as without a query.
    """
    query = _search_text(request)
    current = request.GET.get("current", "")
    conversations = sidebar_conversations(owner=request.user, query=query)
    groups = []
    if query:
        hits_per_conversation = 3
        found: dict[int, list[SearchHit]] = {}
        for hit in message_search(owner=request.user, query=query).hits:
            hits = found.setdefault(hit.conversation_id, [])
            if hit.kind == "message" and len(hits) < hits_per_conversation:
                hits.append(hit)
        best = {c.pk: c for c in selectors.conversation_list(owner=request.user).filter(pk__in=list(found))}
        for pk, conversation in best.items():
            conversation.search_hits = found[pk]  # read by the template only
        if best:
            groups.append({"label": "Best matches", "items": [best[pk] for pk in found if pk in best]})
        conversations = conversations.exclude(pk__in=list(best))
    lists = sidebar_lists(owner=request.user, conversations=conversations, query=query, limit=sidebar_limit(request))
    lists["conversation_groups"] = groups + lists["conversation_groups"]
    return render(
        request,
        "chat/_conversation_list.html",
        {**lists, "query": query, "current_id": query_id(current)},
    )


@require_GET
@cache_control(max_age=86400, public=True)
def code_css(request: HttpRequest) -> HttpResponse:
    return HttpResponse(code_style_css(), content_type="text/css; charset=utf-8")
