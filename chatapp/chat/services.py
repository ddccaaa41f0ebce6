"""Writes for user settings, conversations, "Not now" on a summary prompt and password changes. API
tokens are in token_services.py, model configs in chatapp/providers/services.py, the chat turn in
chat_turn.py.

Errors are django.core.exceptions.ValidationError keyed by field name, in plain words; views and the
API turn them into form and field errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Q
from django.http import Http404
from django.utils import timezone

from chatapp.chat.context import conversation_config
from chatapp.chat.summary_cooldown import history_tokens_now, not_now_reason
from chatapp.providers.llm import llm_target_for
from chatapp.providers.models import LLMConfig
from chatapp.providers.selectors import llm_config_default
from chatapp.providers.services import text_field_clean
from optimizer.tokens import encoding_for

from .folder_models import Folder
from .folder_services import conversation_folder_set
from .models import Conversation, Preference, SummaryJob, UserSettings
from .selectors import user_settings_get
from .textsafe import text_blank, text_storable
from .token_services import api_tokens_revoke_all

DEFAULT_TITLE = "New chat"

# Custom instructions and a chat's system prompt are sent whole on every request (never dropped), so
# each is bounded: 20,000 characters is about 5,000 tokens, room left in any model worth chatting with.
SYSTEM_PROMPT_MAX_CHARS = 20_000


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


def user_settings_update(
    *,
    user: User,
    preference: str | None = None,
    auto_optimize: bool | None = None,
    confirm_compaction: bool | None = None,
    generate_titles: bool | None = None,
    summary_config: LLMConfig | None = UNSET,
    custom_instructions: str | None = None,
) -> UserSettings:
    """Change the given settings (None leaves one unchanged; for summary_config None means "use the
    conversation's own config" and leaving it out leaves it unchanged). Applies from the next request;
    `custom_instructions` ("" clears them) open every chat's leading system message."""
    errors: dict[str, list[str]] = {}
    if custom_instructions is not None:
        custom_instructions = _prompt_clean(
            custom_instructions, field="custom_instructions", label="Custom instructions", errors=errors
        )
    if preference is not None and preference not in Preference.values:
        errors["preference"] = ["Choose fast, balanced or quality."]
    flags = (("auto_optimize", auto_optimize), ("confirm_compaction", confirm_compaction),
             ("generate_titles", generate_titles))
    for field, value in flags:
        if value is not None and not isinstance(value, bool):
            errors[field] = ["Must be true or false."]
    foreign = not isinstance(summary_config, LLMConfig) or summary_config.owner_id != user.pk
    if summary_config is not UNSET and summary_config is not None and foreign:
        errors["summary_config"] = ["No such model configuration."]
    if errors:
        raise ValidationError(errors)

    user_settings = user_settings_get(user=user)
    changed: list[str] = []
    updates: tuple[tuple[str, str | bool | None], ...] = (
        ("preference", preference), *flags, ("custom_instructions", custom_instructions),
    )
    for name, new in updates:
        if new is not None:
            setattr(user_settings, name, new)
            changed.append(name)
    if summary_config is not UNSET:
        user_settings.summary_config = summary_config
        changed.append("summary_config")
    if changed:
        with transaction.atomic():
            if isinstance(summary_config, LLMConfig):
                _config_held(config=summary_config, field="summary_config")
            user_settings.save(update_fields=[*changed, "updated_at"])
            _summary_questions_withdraw(user=user, confirm_compaction=confirm_compaction, auto_optimize=auto_optimize)
    return user_settings


def _summary_questions_withdraw(*, user: User, confirm_compaction: bool | None, auto_optimize: bool | None) -> int:
    """Cancel `user`'s "compact now?" questions when a switch that asks them is turned off. Left waiting,
    each went on asking for a day (until the sweep expired it) although the user had just said not to,
    and held its chat's one active job: no automatic summary was started there meanwhile. Cancelled,
    the next turn that needs a summary starts one as the settings now say (or none, with automatic
    optimization off); not a "Not now" (summary_cooldown), and not counted in the quota."""
    if confirm_compaction is False:
        off = "Ask before compacting"
    elif auto_optimize is False:
        off = "Automatic optimization"
    else:
        return 0
    return SummaryJob.objects.filter(
        conversation__owner=user, status=SummaryJob.Status.AWAITING_CONFIRMATION
    ).update(status=SummaryJob.Status.CANCELLED, error=f"Not asked any more: {off} was turned off.",
             finished_at=timezone.now())


def _prompt_clean(value: Any, *, field: str, label: str, errors: dict[str, list[str]]) -> str:
    """A system prompt as stored: text only, made storable (NUL, lone surrogates) like every text the
    app keeps, line ends as LF (a form posts CRLF: the same prompt must hash the same from the page
    and the API), surrounding blank space dropped (whitespace alone would still be sent), and a text of
    nothing that shows (a zero-width space, a byte order mark, pasted alone) taken as none."""
    if not isinstance(value, str):
        errors.setdefault(field, []).append(f"{label} must be text.")
        return ""
    text = text_storable(value).replace("\r\n", "\n").replace("\r", "\n").strip()
    if text_blank(text):
        text = ""
    if len(text) > SYSTEM_PROMPT_MAX_CHARS:
        errors.setdefault(field, []).append(
            f"{label} must be at most {SYSTEM_PROMPT_MAX_CHARS:,} characters (this text has {len(text):,})."
        )
    return text


def _title_clean(title: Any) -> str:
    errors: dict[str, list[str]] = {}
    text = text_field_clean(title, field="title", label="Title", max_length=200, errors=errors)
    if errors:
        raise ValidationError(errors)
    return text


def _model_choice(
    *, owner: User, llm_config: LLMConfig | None, offline: bool
) -> tuple[LLMConfig | None, bool]:
    """(config, offline) a chat keeps: the one named, else the owner's default now, else the offline model.

    The default is copied, not followed: a chat begun on one model must not move to another because
    a config was added or made default later (its history was written for the first).
    """
    if offline:
        return None, True
    if llm_config is not None:
        if llm_config.owner_id != owner.pk:
            raise ValidationError({"llm_config": ["No such model configuration."]})
        return llm_config, False
    default = llm_config_default(owner=owner)
    return default, default is None


def conversation_create(
    *, owner: User, title: str | None = None, llm_config: LLMConfig | None = None, offline: bool = False,
    system_prompt: str = "",
) -> Conversation:
    """A new conversation on `llm_config`, else on the owner's default config (kept until the user
    switches), else on the offline demo model (`offline=True` asks for it); with its own system prompt
    when one is given (ValidationError, nothing made, when it cannot be one)."""
    errors: dict[str, list[str]] = {}
    prompt = _prompt_clean(system_prompt, field="system_prompt", label="The system prompt", errors=errors)
    if errors:
        raise ValidationError(errors)
    config, offline = _model_choice(owner=owner, llm_config=llm_config, offline=offline)
    conversation = Conversation(owner=owner, llm_config=config, offline=offline, system_prompt=prompt)
    if title is not None:
        conversation.title = _title_clean(title)
        conversation.title_is_custom = True
    else:
        conversation.title = DEFAULT_TITLE
    with transaction.atomic():
        _config_held(config=config)
        conversation.save()
    return conversation


def _config_held(*, config: LLMConfig | None, field: str = "llm_config") -> None:
    """Inside the write's transaction: the config's row locked (PostgreSQL), so a delete in another tab
    waits for the write; deleted before, the row would point at nothing and fail the commit (a 500),
    where it is a config not there."""
    if config is not None and not LLMConfig.objects.select_for_update().filter(pk=config.pk).values_list(
        "pk", flat=True
    ):
        raise ValidationError({field: ["No such model configuration."]})


def _conversation_save(*, conversation: Conversation, fields: list[str]) -> None:
    """Write these fields of the chat. Http404 when it was deleted (another tab) since the request found
    it: the answer to a chat that never was, where save() raised DatabaseError ("did not affect any
    rows"), a 500."""
    if not Conversation.objects.filter(pk=conversation.pk).update(**{name: getattr(conversation, name)
                                                                     for name in fields}):
        raise Http404("No Conversation matches the given query.")


def conversation_rename(*, conversation: Conversation, title: str) -> Conversation:
    conversation.title = _title_clean(title)
    conversation.title_is_custom = True
    # updated_at is left alone: renaming should not move the conversation to the top of the sidebar.
    _conversation_save(conversation=conversation, fields=["title", "title_is_custom"])
    return conversation


def _conversation_mark_set(*, conversation: Conversation, field: str, on: bool) -> Conversation:
    """Set a dated mark (`field`: when; null, not marked) or take it off. Marked again, the chat keeps
    its first date. updated_at is left alone, as for a rename: a mark is not activity, and taken off,
    the chat returns to its place by its last activity."""
    if on == (getattr(conversation, field) is not None):
        return conversation
    setattr(conversation, field, timezone.now() if on else None)
    _conversation_save(conversation=conversation, fields=[field])
    return conversation


def conversation_pin_set(*, conversation: Conversation, pinned: bool) -> Conversation:
    """Pin the chat to the top of the sidebar, or unpin it. The time it was first pinned orders the
    pinned chats, the latest first."""
    return _conversation_mark_set(conversation=conversation, field="pinned_at", on=pinned)


def conversation_archive_set(*, conversation: Conversation, archived: bool) -> Conversation:
    """Archive the chat (out of the sidebar, listed in Settings; a search still finds it) or bring it
    back. Nothing is deleted or changed in it, and any turn in it brings it back (turn_claim)."""
    return _conversation_mark_set(conversation=conversation, field="archived_at", on=archived)


def conversation_archive_all(*, owner: User, archived: bool) -> int:
    """Archive every chat of `owner`'s that is not (or bring back every archived one): how many changed.
    One UPDATE; those already so keep their date."""
    rows = Conversation.objects.filter(owner=owner, archived_at__isnull=archived)
    return rows.update(archived_at=timezone.now() if archived else None)


def conversation_set_system_prompt(*, conversation: Conversation, text: str) -> Conversation:
    """Set the chat's system prompt ("" removes it). It applies from the next request, which records
    the change (turn_records: `stats.system_prompt_changed`); earlier records keep what they sent."""
    errors: dict[str, list[str]] = {}
    cleaned = _prompt_clean(text, field="system_prompt", label="The system prompt", errors=errors)
    if errors:
        raise ValidationError(errors)
    if cleaned != conversation.system_prompt:
        conversation.system_prompt = cleaned
        # updated_at is left alone, as for a rename: the sidebar orders by activity, not by settings.
        _conversation_save(conversation=conversation, fields=["system_prompt"])
    return conversation


def conversation_update(
    *, conversation: Conversation, changes: Mapping[str, Any], llm_config: LLMConfig | None = None,
    folder: Folder | None = None,
) -> Conversation:
    """A chat's settings changed as one (PATCH /api/conversations/<id>/): `changes` holds any of
    system_prompt, title, pinned, archived, folder, llm_config and offline, the config and folder
    already read (`llm_config`, `folder`: the caller's, owned). All or nothing: a refusal met on the
    way (a config or folder deleted in another tab since it was read) leaves the fields before it
    unsaved too, where they were written one by one and the 400 came after a rename had stayed."""
    with transaction.atomic():
        if "system_prompt" in changes:
            conversation = conversation_set_system_prompt(conversation=conversation, text=changes["system_prompt"])
        if "title" in changes:
            conversation = conversation_rename(conversation=conversation, title=changes["title"])
        if "pinned" in changes:
            conversation = conversation_pin_set(conversation=conversation, pinned=changes["pinned"])
        if "archived" in changes:
            conversation = conversation_archive_set(conversation=conversation, archived=changes["archived"])
        if "folder" in changes:
            conversation = conversation_folder_set(conversation=conversation, folder=folder)
        # offline=false alone leaves the demo for the default config (llm_config=null); on a chat with
        # a model it asks for what already holds, and its config stays.
        leaves_offline = changes.get("offline") is False and conversation.offline
        if "llm_config" in changes or changes.get("offline") or leaves_offline:
            conversation = conversation_set_config(
                conversation=conversation, llm_config=llm_config, offline=changes.get("offline", False)
            )
    return conversation


def conversation_delete(*, conversation: Conversation) -> None:
    conversation.delete()


def conversation_set_config(
    *, conversation: Conversation, llm_config: LLMConfig | None, offline: bool = False
) -> Conversation:
    """Switch the model of an existing conversation: to `llm_config`, to the owner's current default
    (None), or to the offline demo model (`offline=True`).

    The stored history, summaries and window are kept: the next request packs them against the new
    config's budget, and the optimizer moves the window forward if the new budget is smaller. Stored
    per-message token counts are not recomputed for the new model's tokenizer (that would mean reading
    the whole history): a switch to another tokenizer marks the chat's counts estimated from then on,
    as they are for models unknown to the tokenizer.
    """
    config, offline = _model_choice(owner=conversation.owner, llm_config=llm_config, offline=offline)
    if conversation.llm_config_id == (config.pk if config is not None else None) and conversation.offline == offline:
        return conversation
    before = llm_target_for(config=conversation_config(conversation=conversation)).model
    conversation.llm_config, conversation.offline = config, offline
    after = llm_target_for(config=conversation_config(conversation=conversation)).model
    fields = ["llm_config", "offline"]
    if conversation.live_message_count and not conversation.token_counts_mixed and (
        encoding_for(before).name != encoding_for(after).name
    ):
        conversation.token_counts_mixed = True
        fields.append("token_counts_mixed")
    # updated_at is left alone, as for a rename: the sidebar orders by activity, not by settings.
    with transaction.atomic():
        _config_held(config=config)
        _conversation_save(conversation=conversation, fields=fields)
    return conversation


def conversations_model_moved(
    *, owner_id: int, config_ids: tuple[int, ...], followers: bool, before: str, after: str, **_: Any
) -> None:
    """Chats whose model changed with their config (providers.model_moves.chats_model_moved: its model
    edited, the config deleted, the default they follow changed), not through conversation_set_config:
    when the tokenizer changed, their stored counts are the old one's and are marked estimated, as a
    switch marks them (context_pack then counts the packed request with the new one)."""
    if encoding_for(before).name == encoding_for(after).name:
        return
    chats = Q(llm_config_id__in=config_ids)
    if followers:
        chats |= Q(llm_config__isnull=True, offline=False)
    Conversation.objects.filter(chats, owner_id=owner_id, live_message_count__gt=0, token_counts_mixed=False).update(
        token_counts_mixed=True
    )


def summary_job_dismiss(*, job: SummaryJob) -> SummaryJob:
    """Answer "Not now" to a "History is NN% of the budget — compact now?" question: the waiting job is cancelled.

    Conditional on the job still waiting, so a dismissal racing "Compact now" (or the expiry sweep)
    cannot cancel a job that has started. Cancelled jobs do not count against the daily quota; a
    later turn that still needs a summary asks again once the history has grown by another tenth of
    the budget (summary_cooldown). Dismissing twice is harmless.
    """
    now = timezone.now()
    # The history level now: the chat asks again once it has grown by a tenth of the budget.
    reason = not_now_reason(history_tokens=history_tokens_now(conversation_id=job.conversation_id))
    dismissed = SummaryJob.objects.filter(pk=job.pk, status=SummaryJob.Status.AWAITING_CONFIRMATION).update(
        status=SummaryJob.Status.CANCELLED, error=reason, finished_at=now
    )
    try:
        job.refresh_from_db()
    except SummaryJob.DoesNotExist:  # gone with its chat, deleted in another tab since the request found it
        raise Http404("No Conversation matches the given query.") from None
    if not dismissed and job.status != SummaryJob.Status.CANCELLED:
        raise ValidationError(
            {"status": [f"This summary is {job.get_status_display().lower()}; only a waiting one can be dismissed."]}
        )
    return job


def user_password_change(*, user: User, password: str | None) -> int:
    """Set `user`'s new password (already validated by the caller's form; None: no password, sign-in by
    password disabled) and revoke their API tokens; how many there were. The user's own change
    (Settings), an admin's reset and the `changepassword` command all come here.

    People change a password when they fear a credential got out, so everything issued under the old
    one must stop working. Django already ends the user's other sessions (each holds a hash of the
    password), but an API token has no tie to the password: without this a leaked token would outlive
    the change by up to API_TOKEN_DAYS. In one transaction, so a failure leaves neither half done.
    """
    with transaction.atomic():
        user.set_password(password)
        user.save(update_fields=["password"])
        return api_tokens_revoke_all(user=user)
