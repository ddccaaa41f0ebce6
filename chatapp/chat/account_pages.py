"""The sign-out page. Signing out is Django's LogoutView, a POST (a link or an image in a page could sign
anyone out); its GET answered a blank 405 page to an address typed or bookmarked."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render


class LogoutView(auth_views.LogoutView):
    http_method_names = ["get", "post", "options"]

    def get(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        """Signs nobody out: a page whose button does (the POST), or the sign-in page once signed out."""
        if not request.user.is_authenticated:
            return redirect(settings.LOGIN_URL)
        return render(request, "registration/logout_confirm.html")
