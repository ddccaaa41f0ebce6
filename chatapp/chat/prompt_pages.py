"""Settings → Prompts: the form of a saved prompt and what the section shows (its views are in
settings_views, with the page's other forms)."""

from __future__ import annotations

from django import forms
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError

from .prompt_selectors import prompt_list
from .prompt_services import prompt_fields_check


class PromptForm(forms.Form):
    # Lengths and forms are the service's checks (prompt_services), said beside the field.
    command = forms.CharField(label="Command", max_length=41, help_text="Typed after “/” in the message box: "
                              "lowercase letters, digits, “-” or “_”.",
                              widget=forms.TextInput(attrs={"autocomplete": "off", "placeholder": "e.g. review"}))
    title = forms.CharField(label="Title", required=False, max_length=100,
                            widget=forms.TextInput(attrs={"placeholder": "e.g. Review my code"}))
    content = forms.CharField(label="Text", strip=False, widget=forms.Textarea(attrs={"rows": 4}),
                              help_text="Put into the message box in place of the command, to finish and send. "
                              "{{CURRENT_DATE}}, {{CURRENT_TIME}}, {{USER_NAME}} and {{CLIPBOARD}} are filled in "
                              "then; any other {{…}}, such as {{topic}}, is a blank selected for you to type over.")


    def clean(self) -> dict:
        cleaned = super().clean()
        if self.errors:
            # A field the form refused (a blank, a length) kept the service's checks from the others, said
            # only once that one was fixed: they are said now, beside the fields the form let pass.
            raw = {name: str(self.data.get(self.add_prefix(name), "")) for name in ("command", "title", "content")}
            try:
                prompt_fields_check(**raw)
            except ValidationError as exc:
                for name, errors in exc.error_dict.items():
                    if name not in self.errors:
                        self.add_error(name, errors)
        return cleaned


def prompt_form(*, pk: int | None = None, data: dict | None = None, initial: dict | None = None) -> PromptForm:
    """A prompt's form, its fields' ids prefixed by the prompt (the page holds one per prompt)."""
    return PromptForm(data, initial=initial, prefix=f"prompt-{pk or 'new'}")


def prompts_context(*, owner: User, bound: dict | None = None) -> dict:
    """What Settings' section (chat/_prompts.html) shows; `bound` holds a refused form by the prompt's
    id ("prompt-new" for a new one), shown open with its errors."""
    bound = bound or {}
    rows = [
        {"prompt": p, "form": bound.get(f"prompt-{p.pk}") or prompt_form(
            pk=p.pk, initial={"command": p.command, "title": p.title, "content": p.content})}
        for p in prompt_list(owner=owner)
    ]
    return {
        "prompts": rows,
        "prompt_new_form": bound.get("prompt-new") or prompt_form(),
        "prompt_open": next((key for key in bound if str(key).startswith("prompt-")), None),
    }
