"""The import readers (chatapp.chat.imports) are pure Python, as their package says: reading a file
pulls in no Django, no database driver and no model client (they run on a worker's bytes; the
service stores what they read)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CODE = """
import sys
from chatapp.chat.imports import document_open
data = b'[{"id": "c1", "title": "T", "chat": {"history": {"currentId": "a", "messages": {'
data += b'"q": {"id": "q", "role": "user", "content": "Hi", "parentId": null, "timestamp": 1700000000},'
data += b'"a": {"id": "a", "role": "assistant", "parentId": "q", "timestamp": 1700000001,'
data += b'"content": "<think>Weigh it.</think>Hello."}}}}}]'
document = document_open(data, max_bytes=10_000)
[(_, record)] = list(document.conversations())
print(record.messages[-1].extra.get("reasoning"), record.messages[-1].content, sep="|")
print(",".join(sorted(m for m in ("django", "openai", "httpx", "psycopg", "celery") if m in sys.modules)) or "clean")
"""


def test_reading_a_file_pulls_in_no_framework():
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, env=env, check=True, cwd=ROOT)
    read, loaded = proc.stdout.split("\n")[:2]
    assert read == "Weigh it.|Hello."  # the reader really ran, thinking lifted out of the answer
    assert loaded == "clean"
