"""Account pages Django leaves bare: the sign-out page (signing out is Django's LogoutView, a POST: a link
or an image in a page could sign anyone out; its GET answered a blank 405 page to an address typed or
bookmarked), and the page of a form whose CSRF token had expired."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import REASON_NO_CSRF_COOKIE
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme

from chatapp.chat.views import page_csp


class LogoutView(auth_views.LogoutView):
    http_method_names = ["get", "post", "options"]

    def get(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        """Signs nobody out: a page whose button does (the POST), or the sign-in page once signed out."""
        if not request.user.is_authenticated:
            return redirect(settings.LOGIN_URL)
        return render(request, "registration/logout_confirm.html")


@page_csp
def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW. Mostly a page opened before its user signed in or out in another tab (which
    renews the token): Django's own answer was a bare "CSRF verification failed. Request aborted." The
    way back is the page the form was on (its Referer, from this site only), else the chats."""
    back = request.META.get("HTTP_REFERER", "")
    same_site = url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()},
                                                require_https=request.is_secure())
    again = urlsplit(back)._replace(scheme="", netloc="").geturl() if same_site and back else reverse("chat-home")
    # No cookie at all: a browser keeping none for this site, which no sign-in can get past.
    context = {"again": again, "no_cookie": reason == REASON_NO_CSRF_COOKIE}
    return render(request, "registration/csrf_failure.html", context, status=403)
