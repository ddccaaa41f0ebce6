from django.apps import AppConfig


class DashboardConfig(AppConfig):
    """The per-conversation optimization dashboard: its pages, API, exports and the aggregates it
    reads (DashboardTotals, DashboardTurnBlock), kept up to date by the chat turn's writes."""

    name = "chatapp.dashboard"
    label = "dashboard"
    default_auto_field = "django.db.models.BigAutoField"
