"""The Django project. The Celery app is `chatapp.celery` (found by `celery -A chatapp`); it is not
imported here, so importing the settings (or anything under chatapp) starts nothing and writes nothing."""
