"""Settings → Prompts: the prompts as a JSON file, and such a file read back (here, on another server,
or from Open WebUI's prompts export). Plain requests that redirect to the section with what was done."""

from __future__ import annotations

from typing import cast

import orjson
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from chatapp.chat.prompt_selectors import prompt_export_items
from chatapp.chat.prompt_services import MAX_PROMPTS_PER_USER, PromptsImported, prompts_import

# Names listed in a line of the report before "and N more".
_NAMED = 8
# The session's key of the last import's report, until Settings' page shows it (prompt_import_report).
_REPORT = "prompt_import_report"


@login_required
@require_GET
def prompt_export(request: HttpRequest) -> HttpResponse:
    items = prompt_export_items(owner=cast(User, request.user))
    response = HttpResponse(orjson.dumps(items, option=orjson.OPT_INDENT_2), content_type="application/json")
    response["Content-Disposition"] = 'attachment; filename="prompts.json"'
    # The user's own data, as the chats' and records' downloads (download_names.streamed_download).
    response["Cache-Control"] = "no-store"
    return response


def _named(commands: list[str]) -> str:
    shown = ", ".join(f"/{c}" for c in commands[:_NAMED])
    return shown + (f" and {len(commands) - _NAMED} more" if len(commands) > _NAMED else "")


def _said(done: PromptsImported) -> list[dict[str, str]]:
    lines: list[dict[str, str]] = []
    if done.added:
        noun = "prompt" if len(done.added) == 1 else "prompts"
        lines.append(_line("success", f"Imported {len(done.added)} {noun}: {_named(done.added)}."))
    if done.cut:
        became = ", ".join(f"/{given} became /{command}" for given, command in done.cut[:_NAMED])
        more = f" and {len(done.cut) - _NAMED} more" if len(done.cut) > _NAMED else ""
        lines.append(_line("warning", f"Cut to 40 characters, the longest a command is here: {became}{more}."))
    if done.skipped:
        lines.append(_line("warning", f"Skipped {len(done.skipped)} whose command you already have (yours kept as "
                                      f"it was): {_named(done.skipped)}."))
    if done.repeated:
        lines.append(_line("warning", f"Skipped {len(done.repeated)} given again in the file (the first one "
                                      f"imported): {_named(done.repeated)}."))
    if done.over_limit:
        # One reason for all of them, said once, with the way to get them: importing again skips the rest.
        lines.append(_line("error", f"Not imported, past the {MAX_PROMPTS_PER_USER} prompts an account holds: "
                                    f"{_named(done.over_limit)}. Delete some, then import the file again (the "
                                    "prompts already here are skipped)."))
    if done.refused:
        more = f" And {len(done.refused) - 3} more." if len(done.refused) > 3 else ""
        lines.append(_line("error", f"Not imported: {' '.join(done.refused[:3])}{more}"))  # each reason a sentence
    return lines


def _line(level: str, text: str) -> dict[str, str]:
    return {"level": level, "text": text}


def prompt_import_report(request: HttpRequest) -> list[dict[str, str]]:
    """The last import's report, once (Settings' page shows it in the Prompts section, by the import):
    not a toast, which fades after seconds, too soon to read up to 8 commands a line and 3 reasons."""
    return request.session.pop(_REPORT, []) if hasattr(request, "session") else []


@login_required
@require_POST
def prompt_import(request: HttpRequest) -> HttpResponse:
    upload = request.FILES.get("file")
    if upload is None:
        report = [_line("error", "Choose a prompts file to import.")]
    else:
        try:
            report = _said(prompts_import(owner=cast(User, request.user), data=upload.read()))
        except ValidationError as exc:
            report = [_line("error", " ".join(exc.messages))]
    request.session[_REPORT] = report
    return redirect(reverse("settings") + "#prompt-import-report")
