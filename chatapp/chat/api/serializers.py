"""Output serializers shared by several API views (and by the streaming views' event payloads).

Input serializers live nested in the view that uses them. Nothing here writes: writes go through
services. The API key is deliberately absent from every output: only whether one is set and its
last four characters.
"""

from __future__ import annotations

from typing import Any, get_args

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from chatapp.chat.context import first_user_message_id
from chatapp.chat.layout import Place, message_place_get
from chatapp.chat.message_services import message_serialize
from chatapp.chat.models import Conversation, Message, OptimizationRecord, UserSettings
from chatapp.chat.rendering import markdown_render
from chatapp.chat.summary_selectors import summary_kept_pins
from chatapp.chat.title_services import title_pending


class ConversationOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = Conversation
        fields = [
            "id",
            "title",
            "title_is_custom",
            "llm_config",
            "offline",
            "system_prompt",
            "window_start_id",
            "live_message_count",
            "live_token_count",
            "summary_count",
            "truncation_count",
            "pinned_at",
            "archived_at",
            "folder",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields
        extra_kwargs = {
            "pinned_at": {"help_text": "When the chat was pinned to the top of the sidebar; null: not pinned."},
            "archived_at": {"help_text": "When the chat was archived (out of the sidebar); null: not archived."},
            "folder": {"help_text": "The id of the folder the chat is in (GET /api/folders/); null: in none."},
        }


class ConversationDetailOutputSerializer(ConversationOutputSerializer):
    # Only here, not in the list: one cache read per conversation shown.
    title_pending = serializers.SerializerMethodField(
        help_text="The model is naming this chat (after its first reply): its title changes within a minute."
    )

    class Meta(ConversationOutputSerializer.Meta):
        fields = [*ConversationOutputSerializer.Meta.fields, "title_pending"]
        read_only_fields = fields

    def get_title_pending(self, conversation: Conversation) -> bool:
        return title_pending(conversation=conversation)


class MessageImageOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    url = serializers.CharField(help_text="Where its bytes are read: the owner's /api/images/<id>/, or a share's.")
    mime = serializers.CharField(help_text="image/png, image/jpeg, image/webp or image/gif, read from the bytes.")
    width = serializers.IntegerField()
    height = serializers.IntegerField()
    bytes = serializers.IntegerField()
    name = serializers.CharField(allow_blank=True, help_text="The file's name when attached (\"\" when pasted).")


class MessageOutputSerializer(serializers.ModelSerializer):
    # Sanitized HTML, so API clients (and the page when it loads older history) show exactly what the
    # server-rendered timeline shows, and never have to sanitize model output themselves.
    html = serializers.SerializerMethodField(
        help_text="Sanitized HTML. Null only for the user's message in the stream's start event."
    )
    # Where the message stands in the context (optimizer.layout.message_place against the stored
    # window start), so the browser never re-derives the static layer; null for summaries and
    # regenerated-away replies. Pass the conversation in the context to read it once per page.
    place = serializers.SerializerMethodField()
    # Issue 13 (branches): where the message stands among the messages that share its parent (an edited
    # user message and its edits, a reply and its regenerations): `sibling_index` of `sibling_count`,
    # 1-based in the order written; the browser shows "n/m" when the count is above 1. Pass
    # `siblings` (branch_selectors.message_sibling_places) in the context to read a page's at once.
    sibling_index = serializers.IntegerField(min_value=1)
    sibling_count = serializers.IntegerField(min_value=1)
    reasoning = serializers.CharField(
        allow_blank=True,
        help_text="A reasoning model's thinking before the answer (plain text; \"\" without any). Never sent back "
        "to a model.",
    )

    images = MessageImageOutputSerializer(
        many=True, help_text="A user message's images (sent along with it); [] for every other message."
    )

    finish_reason = serializers.CharField(
        allow_null=True,
        help_text="Why the model ended a complete reply, as it said: \"stop\", or \"length\" when it reached its "
        "output limit mid-answer (the chat marks such a reply as cut). Null when not said.",
    )

    class Meta:
        model = Message
        fields = [
            "id",
            "conversation",
            "role",
            "kind",
            "content",
            "images",
            "reasoning",
            "finish_reason",
            "html",
            "token_count",
            "char_count",
            "pinned",
            "place",
            "status",
            "superseded",
            "reply_to",
            "parent",
            "sibling_index",
            "sibling_count",
            "model",
            "prompt_tokens",
            "completion_tokens",
            "latency_ms",
            "error",
            "covers_from_id",
            "covers_through_id",
            "covered_message_count",
            "extractive",
            "discarded",
            "edited",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def to_representation(self, instance: Message) -> dict[str, Any]:
        # One message shape for the REST API and the stream's events: message_services builds it, these
        # fields document it (a test checks the two agree).
        siblings = self.context.get("siblings", {}).get(instance.pk)
        # A chat that never held an image (Conversation.has_images) has none to read.
        conversation = self.context.get("conversation")
        without = (conversation is not None and conversation.pk == instance.conversation_id
                   and not conversation.has_images)
        return message_serialize(message=instance, place=self.get_place(instance), siblings=siblings,
                                 images=[] if without else None)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_html(self, obj: Message) -> str | None:
        return markdown_render(obj.content)

    @extend_schema_field(serializers.ChoiceField(choices=get_args(Place), allow_null=True))
    def get_place(self, obj: Message) -> Place | None:
        first_user_id, window_start_id, kept_ids = self._layout(obj)
        return message_place_get(message=obj, first_user_id=first_user_id, window_start_id=window_start_id,
                                 kept_ids=kept_ids)

    def _layout(self, obj: Message) -> tuple[int | None, int | None, frozenset[int]]:
        """The conversation's first user message, window start and kept pins, read once per response."""
        known = self.context.setdefault("layout", {})
        if obj.conversation_id not in known:
            conversation = self.context.get("conversation")
            if conversation is None or conversation.pk != obj.conversation_id:
                conversation = obj.conversation
            known[obj.conversation_id] = (
                first_user_message_id(conversation=conversation),
                conversation.window_start_id,
                summary_kept_pins(conversation=conversation),
            )
        return known[obj.conversation_id]


class SummaryCoverageSerializer(serializers.Serializer):
    """A summary's own columns (what it covers, how it was made, its edits), as every read-only view
    of summaries sends them: the export's document and the dashboard's list extend it."""

    covers_from_id = serializers.IntegerField(allow_null=True)
    covers_through_id = serializers.IntegerField(allow_null=True)
    covered_message_count = serializers.IntegerField(allow_null=True)
    source_chars = serializers.IntegerField(allow_null=True)
    extractive = serializers.BooleanField()
    discarded = serializers.BooleanField()
    edited = serializers.BooleanField()
    edited_from_id = serializers.IntegerField(allow_null=True)


class UserSettingsOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = UserSettings
        fields = [
            "preference", "auto_optimize", "confirm_compaction", "generate_titles", "summary_config",
            "custom_instructions", "updated_at",
        ]
        read_only_fields = fields


class OptimizationRecordOutputSerializer(serializers.ModelSerializer):
    class Meta:
        model = OptimizationRecord
        fields = [
            "id",
            "conversation",
            "reply",
            "preference",
            "model",
            "context_window",
            "budget",
            "triggered",
            "window_start_id",
            "strategy",
            "reason",
            "scores",
            "tokens_full",
            "tokens_sent",
            "provider_prompt_tokens",
            "estimated",
            "sent",
            "dropped_ranges",
            "summary",
            "messages_before",
            "messages_after",
            "pack_ms",
            "cost_sent_usd",
            "cost_full_usd",
            "stats",
            "created_at",
        ]
        read_only_fields = fields
