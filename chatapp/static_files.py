"""Static files through WhiteNoise, each answered as one body.

WhiteNoise answers with a FileResponse: a streaming response over a file, a synchronous iterator. Under
ASGI, Django reads such an iterator whole in a worker thread before sending it (and warns:
"StreamingHttpResponse must consume synchronous iterators"). The file is read here instead, in the
thread the middleware stack already runs in (chat.admission.SyncStackASGIHandler), and sent as a plain
response with WhiteNoise's headers: the same memory, one thread hop fewer, no warning.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from whitenoise.middleware import WhiteNoiseMiddleware


class WholeFileWhiteNoiseMiddleware(WhiteNoiseMiddleware):
    @staticmethod
    def serve(static_file: Any, request: HttpRequest) -> HttpResponse:
        streamed = WhiteNoiseMiddleware.serve(static_file, request)
        try:
            body = b"".join(streamed.streaming_content)
        finally:
            streamed.close()
        response = HttpResponse(body, status=streamed.status_code)
        del response["Content-Type"]  # WhiteNoise's own, or none (a 304)
        for name, value in streamed.items():
            response[name] = value
        return response
