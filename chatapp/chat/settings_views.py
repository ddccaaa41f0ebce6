"""The Settings page and its forms: custom instructions, preferences, model configs (add, edit,
default, delete) and API tokens. Thin function views, as in views.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django import forms
from django.conf import settings
from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.crypto import constant_time_compare
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods, require_POST

from chatapp.chat import selectors, services, token_services
from chatapp.chat.archive_views import archived_context, tabs_told
from chatapp.chat.forms import PREFERENCE_HELP, InstructionsForm, LLMConfigForm, PreferencesForm
from chatapp.chat.prompt_file_views import prompt_import_report
from chatapp.chat.prompt_pages import prompt_form, prompts_context
from chatapp.chat.prompt_selectors import prompt_get
from chatapp.chat.prompt_services import prompt_create, prompt_delete, prompt_update
from chatapp.chat.share_selectors import share_list
from chatapp.chat.token_models import ApiToken, key_digest
from chatapp.chat.token_selectors import api_token_expired, api_token_expires_at, api_token_list
from chatapp.chat.views import page_csp, user_configs
from chatapp.providers import selectors as config_selectors
from chatapp.providers import services as config_services
from chatapp.providers.crypto import secret_readable
from chatapp.providers.models import LLMConfig
from chatapp.providers.netguard import base_url_unresolved


def _validation_to_form(form, exc: ValidationError) -> None:
    if hasattr(exc, "error_dict"):
        for field, errors in exc.error_dict.items():
            target = field if field in form.fields else None
            for error in errors:
                form.add_error(target, error)
    else:
        for error in exc.messages:
            form.add_error(None, error)


Saved = TypeVar("Saved")


def _form_save(form: forms.BaseForm, save: Callable[[], Saved]) -> Saved | None:
    """`save()` (the service's write) when the form is valid; None when nothing was saved, the form
    then showing why (its own errors, or the service's ValidationError on the fields it names)."""
    if not form.is_valid():
        return None
    try:
        return save()
    except ValidationError as exc:
        _validation_to_form(form, exc)
        return None


def _form_answer(request: HttpRequest, form: forms.BaseForm, save: Callable[[], Saved], *, bound: Any,
                 said: Callable[[Saved], tuple[str, str]]) -> HttpResponse:
    """A settings form's POST: saved (`_form_save`), the success said and the page shown where it is
    (`said(saved)`: the words and the anchor); refused, the page again with the form showing why
    (`bound`: its key among the page's forms)."""
    saved = _form_save(form, save)
    if saved is None:
        return _settings_refused(request, bound={bound: form})
    words, anchor = said(saved)
    flash.success(request, words)
    return redirect(reverse("settings") + anchor)


def _delete_question(config: LLMConfig, configs: list[LLMConfig]) -> str:
    """What a model's Delete asks, naming where its chats go (llm_config_delete: the default's, with the
    chats on no config, to the first other model by name, the new default; the others' to the default)."""
    asked = f"Delete “{config.name}”?"
    default = next((c for c in configs if c.is_default), None)
    successor = next((c for c in configs if c.pk != config.pk), None)
    if default is not None and default.pk != config.pk:
        return f"{asked} Its chats switch to your default model, “{default.name}”."
    if config.is_default and successor is not None:
        return f"{asked} Its chats switch to “{successor.name}”, which becomes the default for new chats."
    return f"{asked} Its chats switch to the offline demo model, as new chats do."


def _settings_context(request: HttpRequest, *, bound: dict | None = None) -> dict:
    """Everything the settings page shows; `bound` replaces the blank forms with submitted ones."""
    bound = bound or {}
    configs = user_configs(request.user)
    tokens = api_token_list(user=request.user)
    live = [t for t in tokens if not api_token_expired(token=t)]
    user_settings = selectors.user_settings_get(user=request.user)
    prefs_form = bound.get("prefs") or PreferencesForm(
        initial={
            "preference": user_settings.preference,
            "auto_optimize": user_settings.auto_optimize,
            "confirm_compaction": user_settings.confirm_compaction,
            "generate_titles": user_settings.generate_titles,
            "summary_config": user_settings.summary_config_id,
        },
        configs=config_selectors.llm_config_list(owner=request.user),
    )
    instructions_form = bound.get("instructions") or InstructionsForm(
        initial={"custom_instructions": user_settings.custom_instructions}
    )
    config_forms = [
        (config, bound.get(config.pk) or LLMConfigForm(instance=config), _delete_question(config, configs))
        for config in configs
    ]
    new_form = bound.get("new") or LLMConfigForm(initial={"max_output_tokens": 2000, "temperature": 0.7})
    preference_cards = [
        {"value": value, "label": label, "help": PREFERENCE_HELP[value]}
        for value, label in prefs_form.fields["preference"].choices
    ]
    return {
        "back_url": selectors.conversation_back_url(owner=request.user),
        "configs": configs,
        "config_forms": config_forms,
        # Keys encrypted under a key the server no longer has: shown as unreadable, never sent.
        "unreadable_keys": {c.pk for c in configs if not secret_readable(c.api_key_encrypted)},
        "new_form": new_form,
        "new_open": "new" in bound,
        "open_config_id": next((k for k in bound if isinstance(k, int)), None),
        "prefs_form": prefs_form,
        "instructions_form": instructions_form,
        "preference_cards": preference_cards,
        "current_preference": prefs_form["preference"].value(),
        "user_settings": user_settings,
        "api_tokens": [
            {"token": t, "expires_at": api_token_expires_at(token=t), "expired": api_token_expired(token=t)}
            for t in tokens
        ],
        # Creating one more revokes the oldest (token_services): the button asks first.
        "api_token_oldest": live[-1] if len(live) >= token_services.MAX_TOKENS_PER_USER else None,
        "api_token_max": token_services.MAX_TOKENS_PER_USER,
        "api_token_days": settings.API_TOKEN_DAYS,
        "import_max_bytes": settings.IMPORT_MAX_BYTES,  # the import section's limit
        "shares": share_list(owner=request.user),  # Shared links (chat/_shares.html)
        **archived_context(owner=request.user),  # Archived chats (chat/_archived.html)
        "tabs_told": tabs_told(request),
        **prompts_context(owner=request.user, bound=bound),  # Prompts (chat/_prompts.html)
        "prompt_import_report": prompt_import_report(request),  # its import's report, shown once
    }


def _settings_refused(request: HttpRequest, *, bound: dict) -> HttpResponse:
    """The settings page again, the refused forms in `bound` showing why."""
    return render(request, "chat/settings.html", _settings_context(request, bound=bound), status=400)


def _settings_form_post(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """A POST from one of the settings page's forms. A refused form answers the page again
    (_settings_refused), so the view takes the pages' CSP too; the POSTs that only redirect need none."""
    return page_csp(login_required(require_POST(view)))


# The key of a token just created, kept in the session (server-side: the database, or the cache) from
# api_token_create's POST to the GET it redirects to, which pops it. Why not show it on the POST's own
# response, or ask for a confirmation: reloading that page re-posts, and the silent renewal kills the
# key just copied. This is GitHub's and GitLab's personal-token flow, which users of self-hosted chat UIs
# know: the key shows on the page the creation lands on, once, and a reload or Back shows only its dates
# and renews nothing. The key never goes in a URL, a cookie (the flash messages' storage) or a log.
REVEAL_SESSION_KEY = "settings_new_api_token"


def _new_api_token_take(request: HttpRequest, *, tokens: list[ApiToken]) -> tuple[int, str] | None:
    """(id, key) of the token api_token_create left for this page, forgotten as it is read; None if there
    is none or it is no longer one of the user's tokens (revoked since, e.g. from another tab)."""
    left = request.session.pop(REVEAL_SESSION_KEY, None)
    if not isinstance(left, list) or len(left) != 2:
        return None
    token_id, key = left
    token = next((t for t in tokens if t.pk == token_id), None)
    if token is None or not constant_time_compare(key_digest(str(key)), token.digest):
        return None
    return token.pk, str(key)


# Never cached, as the chat pages (views.chat_new says why); nor a new API token shown, for Back
# to show it again once the user has moved on.
@never_cache
@page_csp
@login_required
@require_http_methods(["GET", "POST"])
def settings_page(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        form = PreferencesForm(request.POST, configs=config_selectors.llm_config_list(owner=request.user))
        # The form's fields are the preferences the service takes: preference, automatic optimization,
        # asking before compacting, the summary model.
        saved = _form_save(form, lambda: services.user_settings_update(user=request.user, **form.cleaned_data))
        if saved is not None:
            flash.success(request, "Preferences saved. They apply to your next message.")
            return redirect(reverse("settings") + "#opt-h")  # back where the form was, not the page's top
        return _settings_refused(request, bound={"prefs": form})
    context = _settings_context(request)
    new = _new_api_token_take(request, tokens=[row["token"] for row in context["api_tokens"]])
    context["new_api_token"], context["new_api_token_id"] = (new[1], new[0]) if new else (None, None)
    return render(request, "chat/settings.html", context)


@_settings_form_post
def instructions_save(request: HttpRequest) -> HttpResponse:
    form = InstructionsForm(request.POST)
    return _form_answer(
        request, form, lambda: services.user_settings_update(
            user=request.user, custom_instructions=form.cleaned_data["custom_instructions"]),
        bound="instructions",
        said=lambda _: ("Custom instructions saved. They apply to your next message in every chat.", "#instructions-h"),
    )


@login_required
@require_POST
def api_token_create(request: HttpRequest) -> HttpResponse:
    """A new API token, named by the form's `name`, shown once by the settings page this redirects to
    (REVEAL_SESSION_KEY says why)."""
    try:
        issued = token_services.api_token_create(user=request.user, name=request.POST.get("name", ""),
                                                 made_in=ApiToken.MadeIn.SETTINGS)
    except ValidationError as exc:
        # A name that cannot be stored is said; otherwise the password changed while this request ran:
        # its session has ended, and the page redirected to says so by asking to sign in.
        for words in getattr(exc, "error_dict", {}).get("name", []):
            flash.error(request, " ".join(words.messages))
        return redirect(reverse("settings") + "#api-h")
    request.session[REVEAL_SESSION_KEY] = [issued.token.pk, issued.key]
    return redirect(reverse("settings") + "#api-h")


@login_required
@require_POST
def api_token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    token = token_services.api_token_revoke(user=request.user, token_id=pk)
    if token is None:
        raise Http404("No such API token.")
    flash.success(request, f"API token “{token.name}” revoked: scripts using it are refused from now on.")
    return redirect(reverse("settings") + "#api-h")


def _config_fields(form: LLMConfigForm) -> dict:
    data = form.cleaned_data
    return {
        "name": data["name"],
        "base_url": data["base_url"],
        "model": data["model"],
        "context_window": data.get("context_window"),
        "max_output_tokens": data["max_output_tokens"],
        "temperature": data["temperature"],
        "accepts_images": data.get("accepts_images"),
    }


def _unresolved_warn(request: HttpRequest, config: LLMConfig) -> None:
    unresolved = base_url_unresolved(config.base_url)
    if unresolved:
        flash.warning(request, unresolved)


# The API key typed is kept out of error reports (mailed to ADMINS, the DEBUG page), as Django's own
# password views keep the passwords: every field, since the forms' prefixes name them by config.
@sensitive_post_parameters()
@_settings_form_post
def config_create(request: HttpRequest) -> HttpResponse:
    form = LLMConfigForm(request.POST)
    config = _form_save(form, lambda: config_services.llm_config_create(
        owner=request.user,
        api_key=form.cleaned_data["api_key"],
        is_default=form.cleaned_data["is_default"],
        **_config_fields(form),
    ))
    if config is not None:
        flash.success(request, f"Added “{config.name}”.")
        _unresolved_warn(request, config)
        return redirect(reverse("settings") + f"#config-{config.pk}")
    return _settings_refused(request, bound={"new": form})


@sensitive_post_parameters()
@_settings_form_post
def config_update(request: HttpRequest, pk: int) -> HttpResponse:
    config = config_selectors.llm_config_get(owner=request.user, pk=pk)
    form = LLMConfigForm(request.POST, instance=config)
    # Read before the update: whether the key stays behind when the address changes (is_valid is cached).
    left_behind = form.is_valid() and config_services.llm_config_key_left_behind(
        config=config, fields={"base_url": form.cleaned_data["base_url"], "api_key": form.cleaned_data["api_key"],
                               "clear_api_key": form.cleaned_data.get("clear_api_key", False)})
    # An empty key field keeps the stored key (never sent back to the page); an empty window
    # returns to the model's known window.
    saved = _form_save(form, lambda: config_services.llm_config_update(
        config=config,
        api_key=form.cleaned_data["api_key"],
        clear_api_key=form.cleaned_data.get("clear_api_key", False),
        is_default=form.cleaned_data["is_default"],
        **_config_fields(form),
    ))
    if saved is not None:
        flash.success(request, f"Saved “{saved.name}”.")
        if left_behind:
            flash.warning(request, config_services.KEY_LEFT_BEHIND)
        _unresolved_warn(request, saved)
        return redirect(reverse("settings") + f"#config-{saved.pk}")
    return _settings_refused(request, bound={config.pk: form})


@login_required
@require_POST
def config_delete(request: HttpRequest, pk: int) -> HttpResponse:
    config = config_selectors.llm_config_get(owner=request.user, pk=pk)
    name = config.name
    successor = config_services.llm_config_delete(config=config)
    # The default moved on its own: said, so that new chats' model is no surprise.
    then = f" “{successor.name}” is now used for new chats." if successor is not None else ""
    flash.success(request, f"Deleted “{name}”.{then}")
    return redirect(reverse("settings") + "#models-h")


@login_required
@require_POST
def config_make_default(request: HttpRequest, pk: int) -> HttpResponse:
    config = config_selectors.llm_config_get(owner=request.user, pk=pk)
    config_services.llm_config_make_default(config=config)
    flash.success(request, f"“{config.name}” is now used for new chats.")
    return redirect(reverse("settings") + "#models-h")


@_settings_form_post
def prompt_add(request: HttpRequest) -> HttpResponse:
    form = prompt_form(data=request.POST)
    return _form_answer(
        request, form, lambda: prompt_create(owner=request.user, **form.cleaned_data), bound="prompt-new",
        said=lambda saved: (f"Saved “/{saved.command}”: type it in the message box.", f"#prompt-{saved.pk}"),
    )


@_settings_form_post
def prompt_edit(request: HttpRequest, pk: int) -> HttpResponse:
    prompt = prompt_get(owner=request.user, pk=pk)
    form = prompt_form(pk=pk, data=request.POST)
    return _form_answer(
        request, form, lambda: prompt_update(prompt=prompt, **form.cleaned_data), bound=f"prompt-{pk}",
        said=lambda saved: (f"Saved “/{saved.command}”.", f"#prompt-{saved.pk}"),
    )


@login_required
@require_POST
def prompt_remove(request: HttpRequest, pk: int) -> HttpResponse:
    prompt = prompt_get(owner=request.user, pk=pk)
    prompt_delete(prompt=prompt)
    flash.success(request, f"Deleted “/{prompt.command}”.")
    return redirect(reverse("settings") + "#prompts-h")
