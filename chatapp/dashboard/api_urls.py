"""Dashboard JSON API; included from chatapp/chat/api/urls.py under /api/dashboard/."""

from django.urls import include, path

from chatapp.dashboard import api as v

urlpatterns = [
    path("overview/", v.DashboardOverviewApi.as_view(), name="api-dashboard-overview"),
    path("conversations/", v.DashboardConversationSavingsApi.as_view(), name="api-dashboard-conversations"),
    path("conversations/<int:pk>/", v.DashboardHeadlineApi.as_view(), name="api-dashboard-headline"),
    # The conversation's charts and lists, under its address.
    path("conversations/<int:pk>/", include([
        path("series/", v.DashboardSeriesApi.as_view(), name="api-dashboard-series"),
        path("map/", v.DashboardMessageMapApi.as_view(), name="api-dashboard-map"),
        path("records/", v.DashboardRecordListApi.as_view(), name="api-dashboard-records"),
        path("records/<int:record_pk>/", v.DashboardRecordContextApi.as_view(), name="api-dashboard-record"),
        path("summaries/", v.DashboardSummaryListApi.as_view(), name="api-dashboard-summaries"),
    ])),
]
