from chatapp.chat.checks import summary_lease_check


def test_lease_shorter_than_model_timeout_warns(settings):
    settings.SUMMARY_JOB_LEASE_SECONDS = 60
    settings.LLM_TIMEOUT_SECONDS = 120
    assert [w.id for w in summary_lease_check(None)] == ["chat.W001"]


def test_default_lease_and_timeout_pass():
    assert summary_lease_check(None) == []
