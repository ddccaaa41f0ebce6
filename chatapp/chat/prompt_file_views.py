"""Settings → Prompts: the prompts as a JSON file, and such a file read back (here, on another server,
or from Open WebUI's prompts export). Plain requests that redirect to the section with what was done."""

from __future__ import annotations

from typing import cast

import orjson
from django.contrib import messages as flash
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from chatapp.chat.prompt_selectors import prompt_export_items
from chatapp.chat.prompt_services import MAX_PROMPTS_PER_USER, PromptsImported, prompts_import

# Names listed in a flash message before "and N more".
_NAMED = 8


@login_required
@require_GET
def prompt_export(request: HttpRequest) -> HttpResponse:
    items = prompt_export_items(owner=cast(User, request.user))
    response = HttpResponse(orjson.dumps(items, option=orjson.OPT_INDENT_2), content_type="application/json")
    response["Content-Disposition"] = 'attachment; filename="prompts.json"'
    return response


def _named(commands: list[str]) -> str:
    shown = ", ".join(f"/{c}" for c in commands[:_NAMED])
    return shown + (f" and {len(commands) - _NAMED} more" if len(commands) > _NAMED else "")


def _said(request: HttpRequest, done: PromptsImported) -> None:
    if done.added:
        noun = "prompt" if len(done.added) == 1 else "prompts"
        flash.success(request, f"Imported {len(done.added)} {noun}: {_named(done.added)}.")
    if done.skipped:
        flash.warning(request, f"Skipped {len(done.skipped)} whose command you already have (yours kept as it "
                               f"was): {_named(done.skipped)}.")
    if done.repeated:
        flash.warning(request, f"Skipped {len(done.repeated)} given again in the file (the first one imported): "
                               f"{_named(done.repeated)}.")
    if done.over_limit:
        # One reason for all of them, said once, with the way to get them: importing again skips the rest.
        flash.error(request, f"Not imported, past the {MAX_PROMPTS_PER_USER} prompts an account holds: "
                             f"{_named(done.over_limit)}. Delete some, then import the file again (the prompts "
                             "already here are skipped).")
    if done.refused:
        more = f" And {len(done.refused) - 3} more." if len(done.refused) > 3 else ""
        flash.error(request, f"Not imported: {' '.join(done.refused[:3])}{more}")  # each reason a sentence


@login_required
@require_POST
def prompt_import(request: HttpRequest) -> HttpResponse:
    upload = request.FILES.get("file")
    if upload is None:
        flash.error(request, "Choose a prompts file to import.")
    else:
        try:
            _said(request, prompts_import(owner=cast(User, request.user), data=upload.read()))
        except ValidationError as exc:
            flash.error(request, " ".join(exc.messages))
    return redirect(reverse("settings") + "#prompts-h")
