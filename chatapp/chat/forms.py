"""Page forms. They validate input shape only; writes go through services.py."""

from __future__ import annotations

import ipaddress
from typing import Any
from urllib.parse import urlsplit

from django import forms
from django.contrib.auth.forms import AuthenticationForm, PasswordChangeForm, UserCreationForm
from django.core.exceptions import ValidationError

from chatapp.chat.login_throttle import (
    TooManyFailures,
    login_attempt_start,
    login_attempt_take_back,
    login_failures_clear,
    password_confirm,
)
from chatapp.chat.models import Preference
from chatapp.chat.selectors import username_held_by_deletion
from chatapp.providers.endpoint_url import EndpointURLValidator
from chatapp.providers.models import LLMConfig

PREFERENCE_HELP = {
    Preference.FAST: "Smallest context: trims early and drops old turns first. Cheapest and quickest replies.",
    Preference.BALANCED: "Keeps recent turns verbatim and summarizes older ones when the context fills up.",
    Preference.QUALITY: "Sends as much as fits and summarizes carefully, so the model remembers the most.",
}


class SignupForm(UserCreationForm):
    class Meta(UserCreationForm.Meta):
        fields = ("username",)

    def clean_username(self) -> str:
        # Just told "Your account was deleted", a user signing up again under its name read "A user with
        # that username already exists." while the worker deleted its data: said as it is, and for how long.
        username = self.cleaned_data.get("username") or ""
        if username and username_held_by_deletion(username=username):
            raise ValidationError(
                "An account with this username is being deleted: the name is free again once its data "
                "is gone, usually within minutes. Try again then, or pick another name.",
                code="unique",
            )
        return super().clean_username()


def throttled_error(*, what: str = "Too many failed sign-ins", wait: int) -> ValidationError:
    """`what` happened too often: the error saying when to try again (`wait` seconds, in minutes)."""
    minutes = -(-wait // 60)
    return ValidationError(f"{what}. Try again in {minutes} minute{'s' if minutes != 1 else ''}.", code="throttled")


def form_errors_focused(form: forms.BaseForm) -> None:
    """A refused form's page opens on its first wrong field (the autofocus moved there from the first
    field, where Django's auth forms put it), so that a screen reader says the error as the page opens;
    refused as a whole (a sign-in that failed), on its first field, described by the form's error
    (partials/form_errors.html's #form-errors) before its own help."""
    if not form.is_bound or not form.errors:
        return
    for field in form.fields.values():
        field.widget.attrs.pop("autofocus", None)
    wrong = next((name for name in form.fields if name in form.errors), None)
    bound = form[wrong or next(iter(form.fields))]
    bound.field.widget.attrs["autofocus"] = True
    if wrong is None:
        said = ["form-errors", *([f"{bound.auto_id}_helptext"] if bound.help_text else [])]
        bound.field.widget.attrs["aria-describedby"] = " ".join(said)


class LoginForm(AuthenticationForm):
    """Django's sign-in form, refused before the password is even checked past the failed sign-in
    limits (login_throttle); `wait` is then the seconds until the next try."""

    wait = 0

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username") or ""
        # Counted as a failure from here on (a ValidationError below keeps it so): see login_attempt_start.
        self.wait = login_attempt_start(request=self.request, username=username)
        if self.wait:
            raise throttled_error(wait=self.wait)
        cleaned = super().clean()
        # Only a real sign-in clears the count: AuthenticationForm.clean() passes a form with no
        # password without checking anything (the field's own "required" refuses it), which is
        # not a failure either.
        if self.get_user() is not None:
            login_failures_clear(request=self.request, username=username)
        else:
            login_attempt_take_back(request=self.request, username=username)
        return cleaned


class ThrottledPasswordChangeForm(PasswordChangeForm):
    """Django's password change form, whose check of the current password keeps the failed sign-in
    limits (login_throttle), counted with the sign-ins of the same username: it checks the same
    password, and a session left open (a shared computer) could otherwise guess it here without end,
    learning the password that outlives the session. `wait` is then the seconds until the next try."""

    wait = 0

    def __init__(self, user: Any, data: Any = None, *, request: Any) -> None:
        super().__init__(user, data)
        self.request = request

    def clean_old_password(self) -> str:
        username = self.user.get_username()
        # Counted as a failure from here on (the ValidationError of a wrong password keeps it so).
        self.wait = login_attempt_start(request=self.request, username=username)
        if self.wait:
            raise throttled_error(wait=self.wait)
        old_password = super().clean_old_password()
        login_failures_clear(request=self.request, username=username)
        return old_password


class AccountDeleteForm(forms.Form):
    """The password asked again before the account is deleted (login_throttle.password_confirm: under
    the failed sign-in limits); `wait` is then the seconds until the next try."""

    # Focused as the page opens and again once refused (as Django's password change form does): without
    # it the focus fell to the page's top and a keyboard user had to find the field again.
    password = forms.CharField(
        label="Your password",
        strip=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "current-password", "autofocus": True}),
    )
    wait = 0

    def __init__(self, user: Any, data: Any = None, *, request: Any) -> None:
        super().__init__(data)
        self.user, self.request = user, request

    def clean_password(self) -> str:
        password = self.cleaned_data["password"]
        try:
            password_confirm(request=self.request, user=self.user, password=password)
        except TooManyFailures as exc:
            self.wait = exc.wait
            raise throttled_error(wait=exc.wait) from None
        return password


# Hosts whose servers (Ollama, LM Studio, vLLM, a Compose service) speak plain HTTP when no scheme is typed.
_LOCAL_SUFFIXES = (".local", ".lan", ".internal", ".home.arpa")


def _speaks_plain_http(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return "." not in host or host.endswith(_LOCAL_SUFFIXES)  # localhost, a Docker service's name
    return address.is_private or address.is_loopback or address.is_link_local


class _EndpointURLField(forms.URLField):
    """Typed without a scheme, a local server's address gets http:// (its servers speak no TLS), any
    other https://; Django's own rule would read "localhost:11434/v1" as the scheme "localhost"."""

    default_validators = [EndpointURLValidator()]

    def to_python(self, value: Any) -> str:
        text = str(value or "").strip()
        if text and "://" not in text:
            try:
                host = (urlsplit(f"//{text}").hostname or "").lower()
            except ValueError:
                host = ""
            text = f"{'http' if host and _speaks_plain_http(host) else 'https'}://{text}"
        return super().to_python(text)


class LLMConfigForm(forms.Form):
    name = forms.CharField(max_length=100, widget=forms.TextInput(attrs={"placeholder": "e.g. OpenAI GPT-4o mini"}))
    base_url = _EndpointURLField(
        label="Base URL",
        max_length=500,
        assume_scheme="https",
        widget=forms.URLInput(attrs={"placeholder": "https://api.openai.com/v1"}),
        help_text=(
            "Any OpenAI-compatible endpoint, e.g. https://api.openai.com/v1 or http://localhost:11434/v1 (Ollama)."
        ),
    )
    model = forms.CharField(max_length=200, widget=forms.TextInput(attrs={"placeholder": "gpt-4o-mini"}))
    api_key = forms.CharField(
        label="API key",
        required=False,
        strip=True,
        # "new-password": browsers ignore "off" on a password field and offer the sign-in password.
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )
    clear_api_key = forms.BooleanField(label="Remove the stored key", required=False)
    context_window = forms.IntegerField(
        label="Context window (tokens)",
        required=False,
        min_value=1,
        help_text="Leave empty to use the model's known window.",
    )
    max_output_tokens = forms.IntegerField(label="Max output tokens", min_value=1, initial=2000)
    temperature = forms.FloatField(
        min_value=0, max_value=2, initial=0.7, widget=forms.NumberInput(attrs={"step": "0.1"})
    )
    is_default = forms.BooleanField(label="Use for new chats (default)", required=False)
    # LLMConfig.accepts_images: "" (null) follows the model registry.
    accepts_images = forms.TypedChoiceField(
        label="Accepts images",
        choices=[("", "As the model registry says"), ("yes", "Yes: send it images"), ("no", "No: send a placeholder")],
        coerce=lambda value: value == "yes",
        empty_value=None,
        required=False,
        help_text="A model that does not see images is sent “[image: WxH]” in each one's place.",
    )

    def __init__(self, *args, instance: LLMConfig | None = None, **kwargs) -> None:
        self.instance = instance
        if instance is not None and "initial" not in kwargs:
            kwargs["initial"] = {
                "name": instance.name,
                "base_url": instance.base_url,
                "model": instance.model,
                # Empty means "the model's known window", so only a user override is prefilled.
                "context_window": (
                    instance.context_window
                    if instance.context_window_source == LLMConfig.WindowSource.USER
                    else None
                ),
                "max_output_tokens": instance.max_output_tokens,
                "temperature": instance.temperature,
                "is_default": instance.is_default,
                "accepts_images": {True: "yes", False: "no"}.get(instance.accepts_images, ""),  # type: ignore[arg-type]
            }
        super().__init__(*args, **kwargs)
        self.prefix = f"cfg{instance.pk}" if instance is not None else "new"
        if instance is None:
            del self.fields["clear_api_key"]

    @property
    def api_key_dropped(self) -> bool:
        """A key was typed into this form, refused for another field: the page does not send it back."""
        return bool(self.errors and self["api_key"].value() and not self["api_key"].errors)

    def api_key_input(self) -> str:
        """The key's input, tied to what the template says beside it (its help, which depends on the stored
        key; the request to type it again), which Django's own describedby knows nothing of."""
        field = self["api_key"]
        said = [f"{field.auto_id}_helptext"]
        if self.api_key_dropped:
            said.append(f"{field.auto_id}_again")
        if field.errors:
            said.append(f"{field.auto_id}_error")
        return field.as_widget(attrs={"aria-describedby": " ".join(said)})

    def clean(self) -> dict:
        data = super().clean()
        window = data.get("context_window")
        max_out = data.get("max_output_tokens")
        if window is not None and max_out is not None and window <= max_out:
            self.add_error(
                "context_window",
                f"The context window must be larger than the max output tokens ({max_out:,}).",
            )
        return data


class InstructionsForm(forms.Form):
    # No max_length here: a browser posts line breaks as CRLF, so the service (which counts the text as
    # stored, line ends as LF) judges the length.
    custom_instructions = forms.CharField(
        label="Custom instructions",
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={
            "rows": 6, "placeholder": "e.g. I am a backend developer; answer briefly, with code in Python.",
        }),
        help_text="Sent first in every chat, never dropped by the optimizer; counts against the context budget.",
    )


class PreferencesForm(forms.Form):
    preference = forms.ChoiceField(choices=Preference.choices, widget=forms.RadioSelect)
    auto_optimize = forms.BooleanField(label="Automatic optimization", required=False)
    confirm_compaction = forms.BooleanField(label="Ask before compacting", required=False)
    generate_titles = forms.BooleanField(label="Name new chats with the model", required=False)
    summary_config = forms.ModelChoiceField(
        queryset=LLMConfig.objects.none(),
        required=False,
        empty_label="Same model as the chat",
        label="Model for summaries",
    )

    def __init__(self, *args, configs=None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if configs is not None:
            self.fields["summary_config"].queryset = configs
