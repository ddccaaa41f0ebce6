"""Dashboard pages and downloads; included from chatapp/chat/urls.py."""

from django.urls import path

from chatapp.dashboard import downloads, pages

urlpatterns = [
    path("dashboard/", pages.dashboard_overview_page, name="dashboard-overview"),
    path("c/<int:pk>/dashboard/", pages.dashboard_conversation_page, name="dashboard-conversation"),
    path("c/<int:pk>/dashboard/export.csv", downloads.dashboard_export_csv, name="dashboard-export-csv"),
    path("c/<int:pk>/dashboard/export.json", downloads.dashboard_export_json, name="dashboard-export-json"),
]
