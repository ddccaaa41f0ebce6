"""Dashboard JSON API; included from chatapp/chat/api/urls.py under /api/dashboard/."""

from django.urls import path

from chatapp.dashboard import api as v

urlpatterns = [
    path("overview/", v.DashboardOverviewApi.as_view(), name="api-dashboard-overview"),
    path("conversations/", v.DashboardConversationSavingsApi.as_view(), name="api-dashboard-conversations"),
    path("conversations/<int:pk>/", v.DashboardHeadlineApi.as_view(), name="api-dashboard-headline"),
    path("conversations/<int:pk>/series/", v.DashboardSeriesApi.as_view(), name="api-dashboard-series"),
    path("conversations/<int:pk>/map/", v.DashboardMessageMapApi.as_view(), name="api-dashboard-map"),
    path("conversations/<int:pk>/records/", v.DashboardRecordListApi.as_view(), name="api-dashboard-records"),
    path(
        "conversations/<int:pk>/records/<int:record_pk>/",
        v.DashboardRecordContextApi.as_view(),
        name="api-dashboard-record",
    ),
    path("conversations/<int:pk>/summaries/", v.DashboardSummaryListApi.as_view(), name="api-dashboard-summaries"),
]
