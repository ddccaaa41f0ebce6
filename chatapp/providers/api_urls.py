"""Model config JSON API; included from chatapp/chat/api/urls.py under /api/configs/."""

from django.urls import path

from chatapp.providers import api as v

urlpatterns = [
    path("", v.LLMConfigListApi.as_view(), name="api-configs"),
    path("model-info/", v.ModelInfoApi.as_view(), name="api-model-info"),
    path("<int:pk>/", v.LLMConfigDetailApi.as_view(), name="api-config"),
    path("<int:pk>/default/", v.LLMConfigMakeDefaultApi.as_view(), name="api-config-default"),
    path("<int:pk>/test/", v.LLMConfigTestApi.as_view(), name="api-config-test"),
]
