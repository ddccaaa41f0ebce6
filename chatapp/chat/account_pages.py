"""Account pages: sign-up, limited per client address (login_throttle.signup_attempt_start), and those
Django leaves bare: the sign-out page (signing out is Django's LogoutView, a POST: a link
or an image in a page could sign anyone out; its GET answered a blank 405 page to an address typed or
bookmarked), and the page of a form whose CSRF token had expired."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.contrib import messages as flash
from django.contrib.auth import login, logout
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import REASON_NO_CSRF_COOKIE
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods

from chatapp.chat.account_services import account_delete as account_delete_service
from chatapp.chat.forms import AccountDeleteForm, SignupForm, throttled_error
from chatapp.chat.login_throttle import signup_attempt_start, signup_attempt_take_back
from chatapp.chat.views import form_page, page_csp


@sensitive_post_parameters("password1", "password2")  # kept out of error reports, as Django's login keeps its own
@page_csp
@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("chat-home")
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        # Counted once the form is valid (password rules included): a typo is not an account.
        wait = signup_attempt_start(request=request)
        if wait:
            form.add_error(None, throttled_error(what="Too many accounts were made from this address", wait=wait))
            return form_page(request, "registration/signup.html", form, wait=wait)
        try:
            with transaction.atomic():
                user = form.save()
        except IntegrityError:
            # The same form sent twice at once (a double-click): both found the name free, and the first
            # saved it while this one hashed its password. Said as for a name taken before (a 500 was),
            # and not counted, as no form refused for its fields is.
            signup_attempt_take_back(request=request)
            user_model = type(form.instance)
            form.add_error("username", form.instance.unique_error_message(user_model, ["username"]))
            return form_page(request, "registration/signup.html", form, wait=0)
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        return redirect("chat-home")
    return form_page(request, "registration/signup.html", form, wait=0)


@sensitive_post_parameters("password")
@never_cache
@page_csp
@login_required
@require_http_methods(["GET", "POST"])
def account_delete(request: HttpRequest) -> HttpResponse:
    """Settings → Account → Delete account…: the password again, then the account and everything in it
    go (account_services.account_delete: off at once, its data deleted by a worker) and the browser is
    signed out. The last active administrator is refused, saying why, on the form."""
    form = AccountDeleteForm(request.user, request.POST if request.method == "POST" else None, request=request)
    if form.is_valid():
        try:
            account_delete_service(user=request.user)
        except ValidationError as exc:
            form.add_error(None, exc)
            return form_page(request, "registration/account_delete.html", form, wait=form.wait)
        logout(request)
        flash.success(request, "Your account was deleted, with everything in it.")
        return redirect("login")
    return form_page(request, "registration/account_delete.html", form, wait=form.wait)


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
