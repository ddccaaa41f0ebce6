"""Branch in new chat past MAX_FORK_MESSAGES: the path is stored as an import job marked as a branch, and
the import worker writes the new chat, the same chat the request writes for a shorter path."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chatapp.chat import fork_services, image_export
from chatapp.chat.fork_services import ForkQueued, conversation_fork
from chatapp.chat.image_models import MessageImage
from chatapp.chat.import_models import ImportedConversation, ImportJob
from chatapp.chat.import_services import MAX_UNFINISHED_IMPORTS, import_job_run
from chatapp.chat.message_services import message_append
from chatapp.chat.models import Conversation, Message
from chatapp.chat.tasks import import_conversations
from chatapp.providers.models import LLMConfig
from tests.chat.test_fork import _path_rows, chat
from tests.support.branches import active_path, assert_path_consistent
from tests.support.chat import make_config
from tests.support.images import png_bytes

pytestmark = pytest.mark.django_db
# The in-request fork's tests' chat (an offline chat of three exchanges, one question edited), by that name.
__all__ = ["chat"]


@pytest.fixture
def published(monkeypatch) -> list[int]:
    """The import task's publications (not run: each test runs the job as the worker would)."""
    sent: list[int] = []
    monkeypatch.setattr(import_conversations, "apply_async", lambda *, args, **kwargs: sent.append(args[0]))
    return sent


def _queued(user, message_id: int, capture) -> ForkQueued:
    with capture(execute=True):
        queued = conversation_fork(owner=user, message_id=message_id)
    assert isinstance(queued, ForkQueued)
    return queued


def _summaries(conversation: Conversation) -> list[tuple]:
    """Each summary's text, and the places on the path of the messages it covers."""
    path = active_path(conversation)
    return [
        (s.content, path.index(s.covers_from_id), path.index(s.covers_through_id))
        for s in Message.objects.filter(conversation=conversation, kind="summary").order_by("id")
    ]


def test_a_path_over_the_limit_becomes_a_branch_job_not_a_chat(
    user, chat, monkeypatch, published, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(fork_services, "MAX_FORK_MESSAGES", 3)
    chats = Conversation.objects.count()
    queued = _queued(user, active_path(chat)[3], django_capture_on_commit_callbacks)

    assert Conversation.objects.count() == chats
    job = ImportJob.objects.get()
    assert queued.job.pk == job.pk and queued.messages == 4
    assert (job.kind, job.source_conversation_id, job.status, job.owner_id) == (
        ImportJob.Kind.BRANCH,
        chat.pk,
        ImportJob.Status.QUEUED,
        user.pk,
    )
    assert job.filename == "Garden (branch)" and job.size_bytes > 0 and job.payload
    assert published == [job.pk]  # after commit, as an upload's job


@pytest.mark.parametrize("follows_default", [False, True], ids=["offline", "following-the-default"])
def test_the_worker_writes_the_chat_the_request_writes(
    user, chat, monkeypatch, published, follows_default, fake_openai, django_capture_on_commit_callbacks
):
    q1, a1, _, a2, _, _ = active_path(chat)
    Message.objects.filter(pk=a1).update(pinned=True)
    message_append(
        conversation=chat,
        role="system",
        kind="summary",
        content="[Conversation summary] tomatoes",
        covers_from_id=q1,
        covers_through_id=a1,
    )
    if follows_default:
        # No config of its own: the import would give the new chat the default itself, the fork must not.
        make_config(user, fake_openai.base_url, name="the default")
        LLMConfig.objects.filter(owner=user).update(is_default=True)
        Conversation.objects.filter(pk=chat.pk).update(offline=False, llm_config=None)
    in_request = conversation_fork(owner=user, message_id=a2)
    assert isinstance(in_request, Conversation)

    monkeypatch.setattr(fork_services, "MAX_FORK_MESSAGES", 0)
    job = _queued(user, a2, django_capture_on_commit_callbacks).job
    outcome = import_job_run(job_id=job.pk)
    assert outcome.status == "done", outcome.detail
    job.refresh_from_db()
    assert (job.status, job.total, job.done, job.payload) == (ImportJob.Status.DONE, 1, 1, b"")
    (pk,) = job.conversation_ids
    in_job = Conversation.objects.get(pk=pk)

    def shape(fork: Conversation) -> tuple:
        return (
            fork.owner_id,
            fork.title,
            fork.system_prompt,
            fork.llm_config_id,
            fork.offline,
            fork.live_message_count,
            _path_rows(fork),
            _summaries(fork),
        )

    assert shape(in_job) == shape(in_request)
    assert (in_job.offline, in_job.llm_config_id) == (not follows_default, None)
    assert _summaries(in_job) == [("[Conversation summary] tomatoes", 0, 1)]
    assert_path_consistent(in_job)
    assert not ImportedConversation.objects.exists()  # a branch is no import to recognise again


def test_a_job_delivered_twice_writes_one_branch(
    user, chat, monkeypatch, published, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(fork_services, "MAX_FORK_MESSAGES", 1)
    job = _queued(user, active_path(chat)[3], django_capture_on_commit_callbacks).job
    chats = Conversation.objects.count()
    assert import_job_run(job_id=job.pk).status == "done"
    assert import_job_run(job_id=job.pk).status == "skipped"
    assert Conversation.objects.count() == chats + 1


def test_a_second_branch_of_the_same_point_is_written_too(
    user, chat, monkeypatch, published, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(fork_services, "MAX_FORK_MESSAGES", 1)
    point = active_path(chat)[3]
    first = _queued(user, point, django_capture_on_commit_callbacks).job
    assert import_job_run(job_id=first.pk).status == "done"
    second = _queued(user, point, django_capture_on_commit_callbacks).job
    assert import_job_run(job_id=second.pk).status == "done"
    first.refresh_from_db()
    second.refresh_from_db()
    assert second.duplicates == 0 and len(second.conversation_ids) == 1
    assert first.conversation_ids != second.conversation_ids
    for job in (first, second):
        assert _path_rows(Conversation.objects.get(pk=job.conversation_ids[0])) == _path_rows(chat)[:4]


def test_the_original_deleted_before_the_worker_ran_still_gives_the_branch(
    user, chat, monkeypatch, published, django_capture_on_commit_callbacks
):
    monkeypatch.setattr(fork_services, "MAX_FORK_MESSAGES", 1)
    rows = _path_rows(chat)[:4]
    job = _queued(user, active_path(chat)[3], django_capture_on_commit_callbacks).job
    chat.delete()
    job.refresh_from_db()
    assert job.source_conversation_id is None and job.kind == ImportJob.Kind.BRANCH
    assert import_job_run(job_id=job.pk).status == "done"
    job.refresh_from_db()
    fork = Conversation.objects.get(pk=job.conversation_ids[0])
    assert _path_rows(fork) == rows and fork.offline


def test_the_backlog_and_the_size_limit_refuse_a_branch_job_and_store_nothing(
    user, chat, monkeypatch, settings, published
):
    monkeypatch.setattr(fork_services, "MAX_FORK_MESSAGES", 1)
    point = active_path(chat)[3]
    settings.IMPORT_MAX_BYTES = 200
    with pytest.raises(ValidationError, match="the largest branch written in the background") as refused:
        conversation_fork(owner=user, message_id=point)
    assert refused.value.code == "too_large" and not ImportJob.objects.exists()

    settings.IMPORT_MAX_BYTES = 10_000_000
    for _ in range(MAX_UNFINISHED_IMPORTS):
        ImportJob.objects.create(owner=user, filename="waiting.json")
    with pytest.raises(ValidationError, match="branch from this message again") as throttled:
        conversation_fork(owner=user, message_id=point)
    assert throttled.value.code == "throttled"
    assert ImportJob.objects.count() == MAX_UNFINISHED_IMPORTS and not published


def test_a_branch_job_keeps_the_images(user, chat, monkeypatch, published, django_capture_on_commit_callbacks):
    q1, _, _, a2, _, _ = active_path(chat)
    MessageImage.objects.create(message_id=q1, mime="image/png", width=3, height=2, byte_count=len(png_bytes(3, 2)),
                                name="a.png", data=png_bytes(3, 2))
    monkeypatch.setattr(fork_services, "MAX_FORK_MESSAGES", 0)
    job = _queued(user, a2, django_capture_on_commit_callbacks).job
    assert import_job_run(job_id=job.pk).status == "done"
    job.refresh_from_db()
    (pk,) = job.conversation_ids
    [copied] = MessageImage.objects.filter(message__conversation_id=pk)
    assert (copied.name, copied.width, copied.height, bytes(copied.data)) == ("a.png", 3, 2, png_bytes(3, 2))


def test_a_branch_job_reads_its_images_bytes_a_run_at_a_time(
    user, chat, monkeypatch, published, django_capture_on_commit_callbacks
):
    """The branch's export is written as the download's is: a batch of 500 messages was read with all its
    images' bytes at once; they are read a run at a time (image_export.IMAGE_RUN_BYTES), every one kept."""
    q1, _, q2, _, q3, a3 = active_path(chat)
    files = {pk: png_bytes(4 + n, 2) for n, pk in enumerate((q1, q2, q3))}
    for pk, data in files.items():
        MessageImage.objects.create(message_id=pk, mime="image/png", width=4, height=2, byte_count=len(data),
                                    name=f"{pk}.png", data=data)
    monkeypatch.setattr(fork_services, "MAX_FORK_MESSAGES", 0)
    monkeypatch.setattr(image_export, "IMAGE_RUN_BYTES", 1)  # each photo a run of its own
    bytes_column = f'{connection.ops.quote_name(MessageImage._meta.db_table)}.{connection.ops.quote_name("data")}'
    with CaptureQueriesContext(connection) as queries:
        job = _queued(user, a3, django_capture_on_commit_callbacks).job
    assert len([q for q in queries if bytes_column in q["sql"]]) == 3
    assert import_job_run(job_id=job.pk).status == "done"
    job.refresh_from_db()
    (pk,) = job.conversation_ids
    copied = MessageImage.objects.filter(message__conversation_id=pk).order_by("id")
    assert [bytes(image.data) for image in copied] == list(files.values())


def test_a_path_of_many_image_bytes_is_a_branch_job_and_past_the_import_limit_refused(
    user, chat, monkeypatch, settings, published, django_capture_on_commit_callbacks
):
    """A path of few messages but many photos was written in the request, which held every image four
    times over (bytes, base64, the export's text, the rows): no bound at all, where the job refuses an
    export past IMPORT_MAX_BYTES. Past MAX_FORK_IMAGE_BYTES it is a job, read a run at a time."""
    q1, _, q2, _, q3, a3 = active_path(chat)
    photo = png_bytes(64, 64)
    for pk in (q1, q2, q3):
        MessageImage.objects.create(message_id=pk, mime="image/png", width=64, height=64, byte_count=len(photo),
                                    name="photo.png", data=photo)
    monkeypatch.setattr(fork_services, "MAX_FORK_IMAGE_BYTES", 2 * len(photo))  # the three are past it

    settings.IMPORT_MAX_BYTES = 3 * len(photo)  # the images' base64 alone is past it
    with pytest.raises(ValidationError, match="the largest branch written in the background") as refused:
        conversation_fork(owner=user, message_id=a3)
    assert refused.value.code == "too_large" and not ImportJob.objects.exists()

    settings.IMPORT_MAX_BYTES = 10_000_000
    queued = _queued(user, a3, django_capture_on_commit_callbacks)
    assert queued.messages == 6 and published == [queued.job.pk]
    assert import_job_run(job_id=queued.job.pk).status == "done"
    queued.job.refresh_from_db()
    (pk,) = queued.job.conversation_ids
    assert MessageImage.objects.filter(message__conversation_id=pk).count() == 3

    # At most the bound, it is written in the request as before.
    monkeypatch.setattr(fork_services, "MAX_FORK_IMAGE_BYTES", 3 * len(photo))
    assert isinstance(conversation_fork(owner=user, message_id=a3), Conversation)
