"""Send / regenerate / retry (Server-Sent Events) and stop.

The views are thin sync DRF views (authentication, ownership, input) that return a
StreamingHttpResponse over an async iterator: under ASGI the reply streams on the event loop, so a
chat waiting on its model ties up no worker thread. Anything rejected before streaming answers a
plain JSON error and stores nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import StreamingHttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from chatapp.chat.admission import turn_start_view
from chatapp.chat.api.errors import validation_error_body
from chatapp.chat.api.inputs import validated
from chatapp.chat.api.parsers import SEND_PARSERS
from chatapp.chat.api.serializers import MessageOutputSerializer
from chatapp.chat.api.views import MessageListApi
from chatapp.chat.branch_services import branch_switch
from chatapp.chat.chat_retry import chat_edit_start, chat_regenerate_start, chat_retry_start
from chatapp.chat.chat_turn import chat_turn_start, chat_turn_stream
from chatapp.chat.image_services import images_validate
from chatapp.chat.jsontext import event_json
from chatapp.chat.message_services import message_content_validate, message_stop
from chatapp.chat.models import Message
from chatapp.chat.rate_limit import RateLimited, send_rate_check
from chatapp.chat.selectors import conversation_get_for_send
from chatapp.chat.size_limits import TooLarge
from chatapp.chat.stream_markup import StreamMarkup
from chatapp.chat.turn_claim import RepeatedSend
from chatapp.chat.turn_types import TurnStart

_SSE_RESPONSES = {
    200: OpenApiResponse(
        description="text/event-stream: `accepted` (the message is stored; on a send, `model`: the config "
        "that answers, its id as text, or \"offline\"), `start` (the context is packed "
        "and the reply opened), `reasoning`… (a reasoning model's thinking, `{text}`: shown apart, never sent "
        "back), `delta`… (the answer's text, `{text}`), now and then `markup` (the answer so far rendered, "
        "`{html}`, sanitized: shown in place of the deltas before it), then `done` or `error` (JSON data per event)."
    ),
    400: OpenApiResponse(description="Empty message, malformed JSON, or not the latest exchange."),
    404: OpenApiResponse(description="No such object of yours."),
    409: OpenApiResponse(description="Another regenerate / retry of the same exchange got there first, a reply "
                         "is still being written there, or (`repeated: true`) this client_key was stored already."),
    413: OpenApiResponse(description="Message (or an image) larger than the configured limit (stated in the answer)."),
    429: OpenApiResponse(description="Too many requests; `Retry-After` says when to try again."),
}


class EventStreamNegotiation(DefaultContentNegotiation):
    """Lets `Accept: text/event-stream` (EventSource-style clients) through to the streaming views.

    DRF's negotiation would answer 406, since no renderer produces event streams: the stream is a
    StreamingHttpResponse that no renderer touches. Whatever is answered before streaming starts
    (400 / 404 / 413 / 429) is rendered as JSON, as for every other client.
    """

    def select_renderer(self, request: Request, renderers: list, format_suffix: str | None = None) -> tuple:
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except NotAcceptable:
            if "text/event-stream" not in request.META.get("HTTP_ACCEPT", ""):
                raise
            renderer = next((r for r in renderers if isinstance(r, JSONRenderer)), None)
            if renderer is None:
                raise
            return renderer, renderer.media_type


def _sse_encode(event: dict[str, Any]) -> bytes:
    if "comment" in event:
        return f": {event['comment']}\n\n".encode()
    data = event_json(event["data"])
    # A model may stream half a surrogate pair per chunk: UTF-8 cannot encode it, the JSON escape
    # ("\ud83d", what backslashreplace writes) carries it, and the client joins the halves.
    return f"event: {event['event']}\ndata: {data}\n\n".encode("utf-8", "backslashreplace")


class _TurnEventStream(StreamingHttpResponse):
    """A turn's reply as Server-Sent Events. A client that leaves while the body streams is handled
    there (chat_turn_stream answers the message without it); one that leaves before the body's first
    step never reaches it: Django then only closes the response (admission_middleware closes one
    whose view was still running), and `close()` answers it all the same, as one that left at
    `accepted` (the message is stored: the page that comes back, or the send made again under its
    key, finds the reply)."""

    def __init__(self, start: TurnStart) -> None:
        self.turn_start = start
        self.settled = False  # the body took the turn over, or close() gave it back
        super().__init__(self._events(), content_type="text/event-stream; charset=utf-8")
        self["Cache-Control"] = "no-cache"
        # Proxies (nginx) must pass each event on at once instead of buffering the reply.
        self["X-Accel-Buffering"] = "no"

    async def _events(self) -> AsyncIterator[bytes]:
        self.settled = True
        markup = StreamMarkup()
        async with contextlib.aclosing(chat_turn_stream(start=self.turn_start)) as events:
            async for event in events:
                yield _sse_encode(event)
                if (drawn := markup.after(event)) is not None:
                    yield _sse_encode(drawn)

    def close(self) -> None:
        try:
            if not self.settled:
                self.settled = True
                # Called in the request's thread (Django's handler, admission._answered): the turn goes
                # back to the server's event loop, where the reply is read without its client.
                async_to_sync(self._left_at_accepted)()
        finally:
            super().close()

    async def _left_at_accepted(self) -> None:
        events = chat_turn_stream(start=self.turn_start)
        await anext(events)  # `accepted`, which nobody hears
        await events.aclose()  # the client is gone: chat_turn packs the context and detaches the reply


def _turn_start_api(*, operation_id: str, summary: str, request: Any = None) -> Callable[[Any], Any]:
    """A POST function view that starts a turn: gated by admission_middleware (turn_start_view), its
    reply streamed as Server-Sent Events to clients that ask for them."""

    def decorate(view: Any) -> Any:
        # @api_view has no decorator for the negotiation: it reads the attribute off the function.
        view.content_negotiation_class = EventStreamNegotiation
        schema = extend_schema(operation_id=operation_id, summary=summary, request=request, responses=_SSE_RESPONSES)
        return turn_start_view(schema(api_view(["POST"])(view)))

    return decorate


def _client_key(request: Request, data: Any) -> Any:
    """An idempotency key, in the body or as the usual header: the same send twice is stored once
    (validated with the message: client_key_validate). Only an absent or empty body key falls back
    to the header: a 0, false, [] or {} is the client's key, refused there, not silently none."""
    key = data.get("client_key")
    return (request.headers.get("Idempotency-Key") or "") if key is None or key == "" else key


def _error(message: str, code: int, **extra: Any) -> Response:
    return Response({"detail": message, **extra}, status=code)


def _validation_response(exc: DjangoValidationError) -> Response:
    if isinstance(exc, TooLarge):  # the text's characters, an image's bytes
        return _error(str(exc.messages[0]), status.HTTP_413_REQUEST_ENTITY_TOO_LARGE, limit=exc.limit)
    # "streaming": Regenerate or Retry while the reply is still being written, a wait as a send's "conflict" is.
    conflict = not hasattr(exc, "error_dict") and getattr(exc, "code", None) in ("conflict", "streaming")
    code = status.HTTP_409_CONFLICT if conflict else status.HTTP_400_BAD_REQUEST
    # Stored already (the same key sent again): the client's text is not to be given back as unsent.
    repeated = {"repeated": True} if isinstance(exc, RepeatedSend) else {}
    return Response({**validation_error_body(exc), **repeated}, status=code)


def _rate_limited(exc: RateLimited) -> Response:
    response = _error(str(exc), status.HTTP_429_TOO_MANY_REQUESTS, retry_after=exc.retry_after)
    response["Retry-After"] = str(exc.retry_after)
    return response


def _start(request: Request, start: Any) -> Response | StreamingHttpResponse:
    """Run a turn starter with the rate limit and the pre-stream error answers."""
    try:
        send_rate_check(user=request.user)
    except RateLimited as exc:
        return _rate_limited(exc)
    try:
        accepted = start()
    except DjangoValidationError as exc:
        return _validation_response(exc)
    return _TurnEventStream(accepted)


def _message_send(request: Request, pk: int) -> Response | StreamingHttpResponse:
    conversation = conversation_get_for_send(owner=request.user, pk=pk)
    data, error = _content_or_error(request, with_images=lambda body: bool(body.get("images")))
    if error is not None:
        return error
    content = data.get("content", "")  # left out, or blank, with an image: the image alone
    parent = validated(SendParentInput, {"parent": data.get("parent")})["parent"]
    try:
        images = images_validate(images=data.get("images"))  # before the rate limit, as the text
    except DjangoValidationError as exc:
        return _validation_response(exc)
    return _start(request, lambda: chat_turn_start(
        user=request.user, conversation=conversation, content=content, client_key=_client_key(request, data),
        parent_id=parent, images=images,
    ))


_PARENT_HELP = ("The message this one answers, as the sender's page shows the chat's latest (the page's "
                "Continue sends it): 409, nothing stored, when the chat went on elsewhere since. Left out: "
                "the message follows whatever is latest.")


class SendParentInput(serializers.Serializer):
    parent = serializers.IntegerField(required=False, allow_null=True, min_value=1, help_text=_PARENT_HELP)


def _content_input(name: str, *, what: str, send: bool = False) -> serializers.Serializer:
    """The body of a send or an edit: the text, and an optional idempotency key (a send's, its parent)."""
    fields: dict[str, serializers.Field] = {
        "content": serializers.CharField(
            required=False, allow_blank=True,
            help_text="The message's text: blank, or left out, only when the message carries an image "
            "(sent with it, or kept by an edit); otherwise 400.",
        ),
        "client_key": serializers.CharField(
            required=False, max_length=64,
            help_text=f"Idempotency key (or the Idempotency-Key header): the same {what} twice is stored once.",
        ),
    }
    if send:
        fields["parent"] = serializers.IntegerField(required=False, allow_null=True, help_text=_PARENT_HELP)
        fields["images"] = serializers.ListField(
            child=inline_serializer("MessageImageInput", {
                "data": serializers.CharField(help_text="The file, base64 (a data: URL is taken too)."),
                "name": serializers.CharField(required=False, help_text="The file's name, for exports."),
            }),
            required=False,
            help_text="Images for a model that sees them: PNG, JPEG, WebP or GIF, their type read from their "
            "bytes; at most MAX_IMAGES_PER_MESSAGE, each at most MAX_IMAGE_BYTES (413 past it).",
        )
    return inline_serializer(name, fields)


class ConversationMessagesApi(MessageListApi):
    """`conversations/<pk>/messages/`: GET is the timeline page (MessageListApi), POST sends."""

    content_negotiation_class = EventStreamNegotiation
    parser_classes = SEND_PARSERS  # a send's images pass the ordinary body limit (parsers.SendJSONParser)
    turn_start = True  # POST: admission_middleware

    @extend_schema(
        operation_id="conversations_messages_send",
        summary="Send a message; the reply streams back as Server-Sent Events",
        request=_content_input("MessageSendInput", what="send", send=True),
        responses=_SSE_RESPONSES,
    )
    def post(self, request: Request, pk: int) -> Response | StreamingHttpResponse:
        return _message_send(request, pk)


def _message_turn_api(name: str, *, operation_id: str, summary: str,
                      service: Callable[[User, Message], TurnStart]) -> Callable[..., Any]:
    """A turn started from one of the requester's messages, with no body: `service(user, message)` is
    the chat service that starts it (Regenerate from a reply, Retry from a user message)."""

    def view(request: Request, pk: int) -> Response | StreamingHttpResponse:
        message = get_object_or_404(Message, pk=pk, conversation__owner=request.user)
        return _start(request, lambda: service(request.user, message))

    view.__name__ = name  # @api_view names its view class after the function (the browsable API's title)
    return _turn_start_api(operation_id=operation_id, summary=summary)(view)


message_regenerate_api = _message_turn_api(
    "message_regenerate_api",
    operation_id="messages_regenerate",
    summary="Answer the same user message again: a sibling reply (the old one stays as a branch)",
    service=lambda user, reply: chat_regenerate_start(user=user, reply=reply),
)
message_retry_api = _message_turn_api(
    "message_retry_api",
    operation_id="messages_retry",
    summary="Retry a user message whose reply failed or was stopped",
    service=lambda user, message: chat_retry_start(user=user, message=message),
)


@extend_schema(
    operation_id="messages_stop",
    summary="Stop a streaming reply; the partial text is kept, marked stopped, and sent as history",
    request=None,
    responses={200: inline_serializer("MessageStopOutput", {"id": serializers.IntegerField(),
                                                             "status": serializers.CharField()}),
               404: OpenApiResponse(description="No such message of yours.")},
)
@api_view(["POST"])
def message_stop_api(request: Request, pk: int) -> Response:
    message = get_object_or_404(Message, pk=pk, conversation__owner=request.user)
    message_stop(message=message)
    # Read back, not refreshed: the chat may have been deleted (another tab) since it was found, and
    # a reply that no longer exists is the same 404 as one that never did.
    stopped = get_object_or_404(Message.objects.only("status"), pk=pk)
    return Response({"id": stopped.pk, "status": stopped.status})


def _content_or_error(request: Request, *, with_images: Callable[[Any], bool]) -> tuple[Any, Response | None]:
    """The body, once its text is checked: a message with an image (`with_images(body)`) may have none."""
    data = request.data  # parses now: malformed JSON answers 400 before anything happens
    if not hasattr(data, "get"):
        return None, _error('Send a JSON object with the message text in "content".', status.HTTP_400_BAD_REQUEST)
    images = with_images(data)
    if "content" not in data and not images:
        return None, _error('Send a JSON object with the message text in "content".', status.HTTP_400_BAD_REQUEST)
    try:
        # Bad input is answered before the rate limiter so it does not use up the user's quota.
        message_content_validate(content=data.get("content", ""), with_images=images)
    except DjangoValidationError as exc:
        return None, _validation_response(exc)
    return data, None


@_turn_start_api(
    operation_id="messages_edit",
    summary="Edit a user message: a new sibling branch with this text; its reply streams as for a send",
    request=_content_input("MessageEditInput", what="edit"),
)
def message_edit_api(request: Request, pk: int) -> Response | StreamingHttpResponse:
    message = get_object_or_404(Message, pk=pk, conversation__owner=request.user)
    # An edit keeps the message's images: with them, the text may go.
    data, error = _content_or_error(request, with_images=lambda _body: message.images.exists())
    if error is not None:
        return error
    return _start(request, lambda: chat_edit_start(
        user=request.user, message=message, content=data.get("content", ""), client_key=_client_key(request, data)
    ))


class BranchInputSerializer(serializers.Serializer):
    index = serializers.IntegerField(min_value=1, help_text="1-based position among the message's siblings.")


@extend_schema(
    operation_id="messages_branch",
    summary="Show another branch: the index-th sibling of this message and the path below it become active",
    request=BranchInputSerializer,
    responses={200: MessageOutputSerializer,
               400: OpenApiResponse(description="No such sibling, or the message is not on the active path."),
               404: OpenApiResponse(description="No such message of yours."),
               409: OpenApiResponse(description="A reply is streaming in this chat.")},
)
@api_view(["POST"])
def message_branch_api(request: Request, pk: int) -> Response:
    message = get_object_or_404(Message, pk=pk, conversation__owner=request.user, kind=Message.Kind.CHAT)
    index = validated(BranchInputSerializer, request.data)["index"]
    try:
        shown = branch_switch(message=message, index=index)
    except DjangoValidationError as exc:
        return _validation_response(exc)
    return Response(MessageOutputSerializer(shown).data)
