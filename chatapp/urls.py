from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include("chatapp.chat.api.urls")),
    path("", include("chatapp.chat.urls")),
]
