"""A Content-Security-Policy on every HTML response.

The app's pages set their own strict policy (views.PAGE_CSP). Everything else that answers HTML —
the API's browsable pages and docs (drf-spectacular's Swagger UI, which runs an inline script), HTML
fragments, Django's error pages — gets this fallback: nothing loads from another origin, no plugin,
no framing, forms post only here. Inline script stays allowed for those third-party pages.
"""

from __future__ import annotations

from collections.abc import Callable

from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest, HttpResponseBase
from django.utils.decorators import sync_and_async_middleware

FALLBACK_CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; "
    "frame-ancestors 'none'"
)


def _with_csp(response: HttpResponseBase) -> HttpResponseBase:
    if response.get("Content-Type", "").startswith("text/html"):
        response.setdefault("Content-Security-Policy", FALLBACK_CSP)
    return response


@sync_and_async_middleware
def csp_middleware(get_response: Callable) -> Callable:
    if iscoroutinefunction(get_response):

        async def middleware(request: HttpRequest) -> HttpResponseBase:
            response = await get_response(request)
            return _with_csp(response)

        return middleware

    def sync_middleware(request: HttpRequest) -> HttpResponseBase:
        return _with_csp(get_response(request))

    return sync_middleware

