from chatapp.chat.checks import summary_lease_check


def test_lease_shorter_than_model_timeout_warns(settings):
    settings.SUMMARY_JOB_LEASE_SECONDS = 60
    settings.SUMMARY_TIMEOUT_SECONDS = 120
    assert [w.id for w in summary_lease_check(None)] == ["chat.W001"]


def test_default_lease_and_timeout_pass():
    assert summary_lease_check(None) == []


def test_the_lease_is_weighed_against_the_summary_calls_own_timeout(settings):
    """A summary's model call is bounded by SUMMARY_TIMEOUT_SECONDS, not the chat's LLM_TIMEOUT_SECONDS."""
    settings.SUMMARY_JOB_LEASE_SECONDS = 300
    settings.LLM_TIMEOUT_SECONDS, settings.SUMMARY_TIMEOUT_SECONDS = 120, 600  # a slow local summary model
    assert [w.id for w in summary_lease_check(None)] == ["chat.W001"]
    settings.LLM_TIMEOUT_SECONDS, settings.SUMMARY_TIMEOUT_SECONDS = 600, 60  # slow chat replies only
    assert summary_lease_check(None) == []


def test_check_deploy_is_clean_with_the_documented_production_variables(tmp_path):
    """Issue 11, finding 8: the README's production variables leave `check --deploy` with nothing to say."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "DEBUG": "false", "HTTPS": "true", "BEHIND_TLS_PROXY": "true",
           "SECURE_HSTS_INCLUDE_SUBDOMAINS": "true", "SECURE_HSTS_PRELOAD": "true",
           "ALLOWED_HOSTS": "chat.example.org", "CSRF_TRUSTED_ORIGINS": "https://chat.example.org",
           "CHATAPP_VAR_DIR": str(tmp_path)}
    env.pop("DATABASE_URL", None)  # the check needs no database
    run = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
                         cwd=root, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "no issues" in run.stdout
    # and without HTTPS the same check warns: the switch is what clears it
    env["HTTPS"] = "false"
    plain = subprocess.run([sys.executable, "manage.py", "check", "--deploy"], cwd=root, env=env,
                           capture_output=True, text=True, timeout=120)
    assert "security.W012" in plain.stdout + plain.stderr
