from typing import Any

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView


class _Favicon(RedirectView):
    # Asked for by a browser on a page without <link rel=icon> (an image opened in its own tab): the
    # pages' icon, by its name at request time (the manifest's hashed name, so not a permanent redirect).
    def get_redirect_url(self, *args: Any, **kwargs: Any) -> str:
        return static("img/favicon.svg")


urlpatterns = [
    # One sign-in page, with its failed sign-in limits: the admin's own would be a way around them.
    path("admin/login/", RedirectView.as_view(pattern_name="login", query_string=True)),
    # One password change page, which revokes the API tokens (views.password_change): the admin's own
    # (its header's "Change password") would leave a staff member's token working after the change.
    path("admin/password_change/", RedirectView.as_view(pattern_name="password_change")),
    path("admin/", admin.site.urls),
    path("favicon.ico", _Favicon.as_view()),
    path("api/", include("chatapp.chat.api.urls")),
    path("", include("chatapp.chat.urls")),
]

# JSON under /api/ (an API client reads `detail`), the site's page elsewhere.
handler404 = "chatapp.chat.api.not_found.not_found"
