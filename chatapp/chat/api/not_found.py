"""Addresses under /api/ that lead nowhere answer as the API answers: JSON led by `detail` (errors.py).

Django's own answers were made for pages: an unknown path got the site's HTML 404, and a path without
its final slash a 301 to the slashed one, which clients follow as a GET. A message POSTed to
`/api/conversations/1/messages` then listed the messages instead of sending one, and a PATCH lost its
body. Under /api/ nothing is redirected; the 404 names the slashed address when that one exists.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.common import CommonMiddleware
from django.urls import is_valid_path
from django.views.defaults import page_not_found

API_PREFIX = "/api/"


class PageCommonMiddleware(CommonMiddleware):
    """Django's CommonMiddleware, without the slash-appending redirect under /api/."""

    def should_redirect_with_slash(self, request: HttpRequest) -> bool:
        return not request.path_info.startswith(API_PREFIX) and super().should_redirect_with_slash(request)


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """handler404 (chatapp/urls.py): JSON under /api/, the site's page elsewhere."""
    path = request.path_info
    if not path.startswith(API_PREFIX):
        return page_not_found(request, exception)
    if not path.endswith("/") and is_valid_path(path + "/"):
        return JsonResponse({"detail": f"Not found. The API's addresses end with a slash: {request.path}/"}, status=404)
    return JsonResponse({"detail": "Not found."}, status=404)
