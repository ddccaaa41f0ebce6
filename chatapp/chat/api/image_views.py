"""An image of one of the requester's messages, as its bytes (the timeline's <img> reads it)."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.decorators import api_view
from rest_framework.request import Request

from chatapp.chat.image_models import MessageImage
from chatapp.chat.image_selectors import image_get

# An image's bytes never change under its id: the browser keeps it, privately (it is the owner's).
IMAGE_CACHE_CONTROL = "private, max-age=31536000, immutable"
# Opened on its own (the "Open full size" link), an image is a document of this site: nothing may load or
# run in it, whatever a browser made of the bytes (as GitHub serves users' raw files).
IMAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; sandbox"


def image_response(image: MessageImage, *, cache_control: str = IMAGE_CACHE_CONTROL,
                   data: bytes | None = None) -> HttpResponse:
    """The image's bytes (or `data`, what is served of them) with the type read from them when stored
    (never the sender's word)."""
    response = HttpResponse(bytes(image.data) if data is None else data, content_type=image.mime)
    response["Cache-Control"] = cache_control
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Disposition"] = "inline"
    response["Content-Security-Policy"] = IMAGE_CSP
    return response


@extend_schema(
    operation_id="images_get",
    summary="An image attached to one of your messages: its bytes, with its type",
    responses={
        (200, "image/*"): OpenApiResponse(response=OpenApiTypes.BINARY),
        404: OpenApiResponse(description="No such image of yours."),
    },
)
@api_view(["GET"])
def image_api(request: Request, pk: int) -> HttpResponse:
    return image_response(image_get(owner=request.user, pk=pk))
