"""Dashboard pages and exports; included from chatapp/chat/urls.py."""

from django.urls import path

from chatapp.chat import dashboard_views

urlpatterns = [
    path("dashboard/", dashboard_views.dashboard_overview_page, name="dashboard-overview"),
    path("c/<int:pk>/dashboard/", dashboard_views.dashboard_conversation_page, name="dashboard-conversation"),
    path("c/<int:pk>/dashboard/export.csv", dashboard_views.dashboard_export_csv, name="dashboard-export-csv"),
    path("c/<int:pk>/dashboard/export.json", dashboard_views.dashboard_export_json, name="dashboard-export-json"),
]
