"""Helpers for the import tests: synthetic files (made-up text only), a job run inline, and an
export of our own format read back as JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from asgiref.sync import async_to_sync
from django.core.files.uploadedfile import SimpleUploadedFile

from chatapp.chat.conversation_export import conversation_export_chunks
from chatapp.chat.import_models import ImportJob
from chatapp.chat.import_services import import_job_create, import_job_run
from chatapp.chat.models import Conversation

FILES = Path(__file__).parent / "import_files"


def file_bytes(name: str) -> bytes:
    return (FILES / name).read_bytes()


def import_now(owner: Any, data: bytes, *, name: str = "export.json") -> ImportJob:
    """Create the job and run its task body at once (what a worker does), then read it back."""
    job = import_job_create(owner=owner, upload=SimpleUploadedFile(name, data))
    import_job_run(job_id=job.pk)
    job.refresh_from_db()
    return job


def export_document(conversation: Conversation) -> dict[str, Any]:
    async def read() -> str:
        return "".join([c async for c in conversation_export_chunks(conversation=conversation, fmt="json")])

    return json.loads(async_to_sync(read)())


def chatgpt_conversation(index: int, *, messages: int, text: str = "") -> dict[str, Any]:
    """A ChatGPT-shaped conversation: a root, then a straight line of alternating messages."""
    mapping: dict[str, Any] = {"r": {"id": "r", "message": None, "parent": None, "children": ["n0"]}}
    for n in range(messages):
        role = "user" if n % 2 == 0 else "assistant"
        mapping[f"n{n}"] = {
            "id": f"n{n}",
            "parent": "r" if n == 0 else f"n{n - 1}",
            "children": [f"n{n + 1}"] if n + 1 < messages else [],
            "message": {
                "id": f"n{n}",
                "author": {"role": role},
                "create_time": 1_700_000_000 + index * 1000 + n,
                "content": {"content_type": "text", "parts": [text or f"{role} says line {n} of chat {index}"]},
                "metadata": {},
            },
        }
    return {
        "title": f"Chat {index}",
        "create_time": 1_700_000_000 + index * 1000,
        "update_time": 1_700_000_000 + index * 1000 + messages,
        "mapping": mapping,
        "current_node": f"n{messages - 1}" if messages else "r",
    }
