"""Import jobs: the API (upload → 202 → poll), the upload limit, ownership, progress, and a job
delivered twice or taken over after its worker died."""

from __future__ import annotations

import json
import zlib
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import OperationalError
from django.utils import timezone
from rest_framework.test import APIClient

from chatapp.chat import import_services
from chatapp.chat.import_models import ImportJob
from chatapp.chat.import_services import import_job_create, import_job_run
from chatapp.chat.models import Conversation, Message
from chatapp.chat.tasks import import_conversations
from chatapp.providers.models import LLMConfig
from chatapp.providers.services import llm_config_delete
from tests.chat.importkit import chatgpt_conversation, file_bytes
from tests.support.accounts import token_client
from tests.support.worker import wait_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(db):
    return get_user_model().objects.create_user(username="importer", password="a long test password 9")


@pytest.fixture
def api(owner) -> APIClient:
    return token_client(owner)


@pytest.fixture
def published(monkeypatch) -> list[tuple[int, str]]:
    """The task's publications, run at once in this process (as a worker would run them)."""
    sent: list[tuple[int, str]] = []

    def apply_async(*, args, queue, **kwargs):
        sent.append((args[0], queue))
        import_job_run(job_id=args[0])

    monkeypatch.setattr(import_conversations, "apply_async", apply_async)
    return sent


def _upload(api: APIClient, data: bytes, name: str = "conversations.json"):
    return api.post("/api/imports/", {"file": SimpleUploadedFile(name, data)}, format="multipart")


def test_upload_answers_202_then_the_job_reports_its_conversations(api, owner, published,
                                                                   django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = _upload(api, file_bytes("chatgpt_branch.json"))
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "queued" and body["filename"] == "conversations.json"
    assert response["Location"] == f"/api/imports/{body['id']}/"
    assert published == [(body["id"], "celery")]  # the default queue (settings.CELERY_IMPORT_QUEUE)

    state = api.get(f"/api/imports/{body['id']}/").json()
    assert (state["status"], state["format"], state["total"], state["done"], state["progress"]) == (
        "done", "chatgpt", 2, 2, 1.0)
    assert (state["imported"], state["skipped_count"], state["error"]) == (2, 0, "")
    assert state["omitted"] == {"tool_messages": 1, "hidden_messages": 1}  # branches are imported, not omitted
    ids = list(Conversation.objects.filter(owner=owner).order_by("id").values_list("id", flat=True))
    assert state["conversations"] == [
        {"id": ids[0], "title": "Sourdough schedule", "archived": False},
        {"id": ids[1], "title": "Bike gear ratios", "archived": False}]
    listed = api.get("/api/imports/").json()
    assert [j["id"] for j in listed["results"]] == [body["id"]] and "conversations" not in listed["results"][0]


def test_a_failed_job_says_why(api, published, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        job_id = _upload(api, b"<html><body>not an export</body></html>", "chat.html").json()["id"]
    state = api.get(f"/api/imports/{job_id}/").json()
    assert state["status"] == "failed" and state["conversations"] == []
    assert state["error"].startswith("The file is not JSON: it begins with '<html>")


def test_another_users_job_is_a_404_like_a_missing_one(api, owner, published):
    other = get_user_model().objects.create_user(username="someone", password="another long password 7")
    theirs = import_job_create(owner=other, upload=SimpleUploadedFile("x.json", b"[]"))
    response = api.get(f"/api/imports/{theirs.pk}/")
    missing = api.get(f"/api/imports/{theirs.pk + 1000}/")
    assert response.status_code == missing.status_code == 404
    assert response.json() == missing.json()
    assert api.get("/api/imports/").json()["results"] == []


def test_unauthenticated_is_refused(db):
    assert APIClient().post("/api/imports/", {}).status_code == 401


def test_upload_over_the_limit_is_a_413_and_stores_nothing(api, settings):
    settings.IMPORT_MAX_BYTES = 2000
    response = _upload(api, b"[" + b" " * 3000 + b"]")
    assert response.status_code == 413
    assert response.json()["detail"].endswith("the largest import is 0.0 MB.")
    assert not ImportJob.objects.exists()


def test_an_upload_over_the_limit_says_the_limit_as_every_413_does(api, settings):
    """The server's body guard answered {detail, limit}; the same file refused while it was parsed (a body
    whose length the guard could not hold against it) answered {detail} alone."""
    settings.IMPORT_MAX_BYTES = 2000

    response = _upload(api, b"[" + b" " * 3000 + b"]")

    assert response.status_code == 413
    assert response.json() == {"detail": "The file is too large: the largest import is 0.0 MB.", "limit": 2000}


def test_two_files_in_one_upload_are_refused_not_one_of_them_dropped(api):
    """`curl -F file=@a.json -F file=@b.json` answered 202 for a job of b.json alone: a.json was never
    imported, and nothing said so."""
    files = [SimpleUploadedFile("a.json", b"[]"), SimpleUploadedFile("b.json", b"[]")]

    response = api.post("/api/imports/", {"file": files}, format="multipart")

    assert response.status_code == 400
    assert response.json()["file"] == ["Send one file per upload: this one held 2."]
    assert not ImportJob.objects.exists()


def test_the_service_refuses_a_large_upload_too(owner, settings):
    settings.IMPORT_MAX_BYTES = 1024
    with pytest.raises(import_services.ImportTooLarge, match="the largest import is"):
        import_job_create(owner=owner, upload=SimpleUploadedFile("big.json", b"[" + b" " * 2000 + b"]"))


def test_missing_or_empty_file_is_a_400(api):
    assert _upload(api, b"").status_code == 400
    response = api.post("/api/imports/", {}, format="multipart")
    assert response.status_code == 400 and "file" in response.json()


def test_progress_moves_one_conversation_at_a_time(owner, monkeypatch):
    document = [chatgpt_conversation(i, messages=4) for i in range(5)]
    job = import_job_create(owner=owner, upload=SimpleUploadedFile("c.json", json.dumps(document).encode()))
    seen: list[tuple[int, int, int]] = []
    store = import_services.conversation_import

    def watching(**kwargs):
        row = ImportJob.objects.get(pk=job.pk)
        seen.append((row.done, row.total, len(row.conversation_ids)))
        return store(**kwargs)

    monkeypatch.setattr(import_services, "conversation_import", watching)
    import_job_run(job_id=job.pk)
    assert seen == [(i, 5, i) for i in range(5)]
    job.refresh_from_db()
    assert (job.status, job.done, job.total, job.lease_expires_at) == ("done", 5, 5, None)
    assert job.started_at <= job.finished_at and bytes(job.payload) == b""


def test_a_second_delivery_imports_nothing_twice(owner):
    job = import_job_create(owner=owner, upload=SimpleUploadedFile("c.json", file_bytes("openwebui_branch.json")))
    assert import_job_run(job_id=job.pk).status == "done"
    assert import_job_run(job_id=job.pk).status == "skipped"
    assert Conversation.objects.filter(owner=owner).count() == 2


def test_a_running_job_with_a_live_lease_is_left_to_its_worker(owner):
    job = import_job_create(owner=owner, upload=SimpleUploadedFile("c.json", file_bytes("openwebui_branch.json")))
    ImportJob.objects.filter(pk=job.pk).update(status="running", attempts=1,
                                               lease_expires_at=timezone.now() + timedelta(seconds=60))
    outcome = import_job_run(job_id=job.pk)
    assert outcome.status == "busy" and 55 < outcome.retry_in <= 62
    assert not Conversation.objects.exists()


def test_a_dead_workers_job_is_resumed_after_its_lease(owner):
    """The worker died after storing the first conversation (its transaction moved `done` to 1)."""
    document = [chatgpt_conversation(i, messages=2) for i in range(3)]
    job = import_job_create(owner=owner, upload=SimpleUploadedFile("c.json", json.dumps(document).encode()))
    assert import_job_run(job_id=job.pk).status == "done"
    first = ImportJob.objects.get(pk=job.pk).conversation_ids[0]
    Conversation.objects.exclude(pk=first).delete()
    ImportJob.objects.filter(pk=job.pk).update(
        status="running", done=1, conversation_ids=[first], lease_expires_at=timezone.now() - timedelta(seconds=1),
        payload=zlib.compress(json.dumps(document).encode()), finished_at=None,
    )
    assert import_job_run(job_id=job.pk).status == "done"
    job.refresh_from_db()
    assert (job.attempts, job.done, len(job.conversation_ids)) == (2, 3, 3)
    assert list(Conversation.objects.filter(owner=owner).order_by("id").values_list("title", flat=True)) == [
        "Chat 0", "Chat 1", "Chat 2"]


def test_a_job_that_keeps_killing_its_worker_fails(owner):
    job = import_job_create(owner=owner, upload=SimpleUploadedFile("c.json", file_bytes("openwebui_branch.json")))
    ImportJob.objects.filter(pk=job.pk).update(status="running", attempts=import_services.MAX_ATTEMPTS,
                                               lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert import_job_run(job_id=job.pk).status == "failed"
    job.refresh_from_db()
    assert job.status == "failed" and "stopped 3 times" in job.error and not Message.objects.exists()


def test_a_stale_delivery_cannot_write_after_a_takeover(owner, monkeypatch):
    document = [chatgpt_conversation(i, messages=2) for i in range(2)]
    job = import_job_create(owner=owner, upload=SimpleUploadedFile("c.json", json.dumps(document).encode()))
    store = import_services.conversation_import

    def taken_over(**kwargs):
        ImportJob.objects.filter(pk=job.pk).update(attempts=99)  # another delivery claimed it meanwhile
        return store(**kwargs)

    monkeypatch.setattr(import_services, "conversation_import", taken_over)
    assert import_job_run(job_id=job.pk).status == "skipped"
    assert not Conversation.objects.exists()  # the conversation's transaction was rolled back whole


def test_a_broker_that_cannot_be_reached_fails_the_job_at_once(owner, monkeypatch,
                                                               django_capture_on_commit_callbacks):
    def unreachable(**kwargs):
        raise ConnectionRefusedError("no broker")

    monkeypatch.setattr(import_conversations, "apply_async", unreachable)
    with django_capture_on_commit_callbacks(execute=True):
        job = import_job_create(owner=owner, upload=SimpleUploadedFile("c.json", b"[]"))
    job.refresh_from_db()
    assert job.status == "failed" and "could not be reached" in job.error


def test_the_schema_documents_the_import_routes(api):
    schema = api.get("/api/schema/", {"format": "json"}).json()
    post = schema["paths"]["/api/imports/"]["post"]
    assert "multipart/form-data" in post["requestBody"]["content"]
    assert {"202", "400", "413"} <= set(post["responses"])
    assert "200" in schema["paths"]["/api/imports/{id}/"]["get"]["responses"]


def test_the_sweep_publishes_a_dead_workers_job_again(owner, published):
    document = [chatgpt_conversation(i, messages=2) for i in range(2)]
    job = import_job_create(owner=owner, upload=SimpleUploadedFile("c.json", json.dumps(document).encode()))
    live = timezone.now() + timedelta(seconds=60)
    ImportJob.objects.filter(pk=job.pk).update(status="running", attempts=1, lease_expires_at=live)
    assert import_services.import_jobs_sweep() == 0  # its worker is still trusted
    ImportJob.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert import_services.import_jobs_sweep() == 1
    assert published == [(job.pk, "celery")]
    job.refresh_from_db()
    assert (job.status, job.attempts, len(job.conversation_ids)) == ("done", 2, 2)
    assert import_services.import_jobs_sweep() == 0


def test_the_sweep_command_publishes_a_dead_workers_import_too(owner, published):
    """`manage.py summary_sweep` (deployments without beat) runs beat's whole pass, imports included."""
    from io import StringIO

    from django.core.management import call_command

    document = [chatgpt_conversation(i, messages=2) for i in range(2)]
    job = import_job_create(owner=owner, upload=SimpleUploadedFile("c.json", json.dumps(document).encode()))
    stale = timezone.now() - timedelta(seconds=1)
    ImportJob.objects.filter(pk=job.pk).update(status="running", attempts=1, lease_expires_at=stale)
    out = StringIO()
    call_command("summary_sweep", stdout=out)
    assert "1 imports published again" in out.getvalue()
    assert published == [(job.pk, "celery")]
    job.refresh_from_db()
    assert (job.status, len(job.conversation_ids)) == ("done", 2)


def test_the_sweep_publishes_a_queued_job_whose_message_was_lost(owner, published, settings,
                                                                  django_capture_on_commit_callbacks):
    settings.IMPORT_LEASE_SECONDS = 1
    with django_capture_on_commit_callbacks(execute=False):  # published, then lost before any worker
        job = import_job_create(owner=owner, upload=SimpleUploadedFile("c.json", file_bytes("openwebui_branch.json")))
    assert import_services.import_jobs_sweep() == 0  # its lease runs from the upload
    wait_for(import_services.import_jobs_sweep, timeout=10, interval=0.2, what="the sweep to publish the job")
    assert published == [(job.pk, "celery")]
    job.refresh_from_db()
    assert (job.status, job.attempts) == ("done", 1)


def test_settings_page_has_the_import_section(client, owner, settings):
    settings.IMPORT_MAX_BYTES = 50_000_000
    client.force_login(owner)
    page = client.get("/settings/").content.decode()
    assert '<h2 id="import-h">Import and export</h2>' in page and "up to 50 MB." in page
    assert '<label class="field-label" for="import-file">File to import</label>' in page
    assert '<progress id="import-progress"' in page and 'data-max-bytes="50000000"' in page
    assert '<script type="module" src="/static/js/import.js">' in page


def _longchat_document(title: str, when: str) -> dict:
    return {"format": "longchat.conversation", "version": 1,
            "conversation": {"title": title, "created_at": when, "updated_at": when},
            "messages": [{"id": 1, "role": "user", "content": f"hello from {title}", "created_at": when,
                          "updated_at": when}]}


@pytest.mark.parametrize("odd", ["9999-12-31T23:30:00-05:00", "0001-01-01T00:30:00+05:00"])
def test_a_date_out_of_range_in_utc_skips_its_conversation_only(api, owner, odd):
    # Valid as written, year 10000 or year 0 in UTC: SQLite's adapter raised and failed the whole job;
    # PostgreSQL stored it, and every list of chats then failed to read it back (a 500).
    good = "2024-03-09T14:02:33+00:00"
    documents = [_longchat_document("first", good), _longchat_document("odd", odd), _longchat_document("third", good)]
    job = import_job_create(owner=owner, upload=SimpleUploadedFile("chats.json", json.dumps(documents).encode()))

    import_job_run(job_id=job.pk)

    job.refresh_from_db()
    assert job.status == "done"
    assert [s["index"] for s in job.skipped] == [1] and "out of range" in job.skipped[0]["error"]
    listed = api.get("/api/conversations/")
    assert listed.status_code == 200
    assert sorted(c["title"] for c in listed.json()["results"]) == ["first", "third"]


def test_a_sweep_that_cannot_reach_the_broker_keeps_a_half_done_import_for_the_next_sweep(owner, monkeypatch):
    """The worker died after storing the first conversation; the sweep that would publish the job again
    finds the broker down for a moment. The job must stay resumable (queued, its file kept), not fail:
    failing it drops the file, so the rest is lost and uploading again imports the first one twice."""
    document = [chatgpt_conversation(i, messages=2) for i in range(3)]
    job = import_job_create(owner=owner, upload=SimpleUploadedFile("c.json", json.dumps(document).encode()))
    ImportJob.objects.filter(pk=job.pk).update(status="running", attempts=1,
                                               lease_expires_at=timezone.now() - timedelta(seconds=1))

    def unreachable(**kwargs):
        raise ConnectionRefusedError("no broker")

    monkeypatch.setattr(import_conversations, "apply_async", unreachable)
    assert import_services.import_jobs_sweep() == 0
    job.refresh_from_db()
    assert (job.status, job.error) == ("queued", "")
    assert bytes(job.payload) and job.lease_expires_at > timezone.now()
    monkeypatch.undo()  # the broker is back: the next sweep publishes it, and the import resumes
    ImportJob.objects.filter(pk=job.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    ran: list[int] = []
    monkeypatch.setattr(import_conversations, "apply_async",
                        lambda *, args, **kwargs: ran.append(import_job_run(job_id=args[0]).status == "done"))
    assert import_services.import_jobs_sweep() == 1 and ran == [True]
    job.refresh_from_db()
    assert (job.status, job.done, len(job.conversation_ids)) == ("done", 3, 3)


def test_a_stale_delivery_that_crashes_leaves_the_job_and_its_file_to_the_new_holder(owner, monkeypatch):
    document = [chatgpt_conversation(i, messages=2) for i in range(2)]
    job = import_job_create(owner=owner, upload=SimpleUploadedFile("c.json", json.dumps(document).encode()))

    def taken_over_then_crash(*args, **kwargs):
        # Reading the file outlasted the lease: another delivery claimed the job, and this one's
        # connection was closed meanwhile.
        ImportJob.objects.filter(pk=job.pk).update(attempts=2)
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(import_services, "document_open", taken_over_then_crash)
    with pytest.raises(OperationalError):
        import_conversations(job.pk)
    job.refresh_from_db()
    # Failed, it would lose the new holder's import: the file dropped, its writes refused.
    assert (job.status, job.attempts, job.error) == ("running", 2, "") and bytes(job.payload)


def test_a_delivery_that_crashes_holding_the_job_fails_it_and_keeps_what_it_imported(owner, monkeypatch):
    document = [chatgpt_conversation(i, messages=2) for i in range(2)]
    job = import_job_create(owner=owner, upload=SimpleUploadedFile("c.json", json.dumps(document).encode()))
    store = import_services.conversation_import

    def second_crashes(**kwargs):
        if kwargs["index"] == 1:
            raise RuntimeError("a bug")
        return store(**kwargs)

    monkeypatch.setattr(import_services, "conversation_import", second_crashes)
    with pytest.raises(RuntimeError):
        import_conversations(job.pk)
    job.refresh_from_db()
    assert job.status == "failed" and "Internal error while importing (RuntimeError)" in job.error
    assert len(job.conversation_ids) == 1 and Conversation.objects.filter(owner=owner).count() == 1


@pytest.mark.django_db(transaction=True)  # the foreign key is checked when each conversation commits
def test_a_model_config_deleted_while_an_import_runs_costs_none_of_the_chats_after_it(owner, monkeypatch):
    """The chats after the deletion take the default that follows, as a new chat would: they were all
    skipped, "the database refused it", pointed at the config that was gone."""
    first = LLMConfig.objects.create(owner=owner, name="first", base_url="http://models.example/v1",
                                     model="gpt-4o-mini", context_window=8000, is_default=True)
    second = LLMConfig.objects.create(owner=owner, name="second", base_url="http://models.example/v1",
                                      model="gpt-4o-mini", context_window=8000)
    document = [chatgpt_conversation(i, messages=2) for i in range(3)]
    job = import_job_create(owner=owner, upload=SimpleUploadedFile("c.json", json.dumps(document).encode()))
    store = import_services.conversation_import

    def deleted_after_the_first(**kwargs):
        stored = store(**kwargs)
        if kwargs["index"] == 0:
            llm_config_delete(config=LLMConfig.objects.get(pk=first.pk))  # Settings, in another tab
        return stored

    monkeypatch.setattr(import_services, "conversation_import", deleted_after_the_first)
    assert import_job_run(job_id=job.pk).status == "done"
    job.refresh_from_db()
    assert (len(job.conversation_ids), job.skipped) == (3, [])
    configs = Conversation.objects.filter(owner=owner).order_by("id").values_list("llm_config_id", flat=True)
    assert list(configs) == [None, second.pk, second.pk]


def test_an_owner_cannot_queue_imports_past_the_backlog_limit(api, owner):
    """Imports share the workers' default queue with everyone's chat titles: one account uploading
    file after file (a script retrying on each timeout) queued them all, holding every user's titles
    and imports behind its own. A few at a time: past them a 429 that says why, nothing stored."""
    # No worker runs: each upload stays queued.
    accepted = [_upload(api, file_bytes("chatgpt_branch.json")) for _ in range(3)]  # the README's three
    assert [r.status_code for r in accepted] == [202, 202, 202]

    refused = _upload(api, file_bytes("chatgpt_branch.json"))
    assert refused.status_code == 429, refused.content
    assert "waiting or running" in refused.json()["detail"]
    assert ImportJob.objects.filter(owner=owner).count() == 3
    # Another account's imports are its own.
    other = get_user_model().objects.create_user(username="neighbour", password="a long test password 8")
    assert _upload(token_client(other), file_bytes("chatgpt_branch.json")).status_code == 202

    # Once one has ended, the next file is taken.
    ImportJob.objects.filter(pk=accepted[0].json()["id"]).update(status=ImportJob.Status.DONE)
    assert _upload(api, file_bytes("chatgpt_branch.json")).status_code == 202
