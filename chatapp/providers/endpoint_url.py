"""What a model's base URL may look like: Django's URL check, widened to the hosts model servers run on.
The settings form and the services (so the API) hold a base URL to the same rule; where it resolves is
netguard's check."""

from __future__ import annotations

import re
from typing import cast

from django.core.validators import URLValidator

# A host name's labels with underscores too: Docker Compose resolves a service by its name as written
# (`local_llm`), and hosts files take such names; the model client connects to them.
_LABEL_RE = URLValidator.hostname_re.replace("0-9", "0-9_")
_LABELS_RE = URLValidator.domain_re.replace("0-9", "0-9_")
# A compiled pattern (lazily) in Django; the stubs allow a string too.
_DJANGO_URL_RE = cast(re.Pattern[str], URLValidator.regex)


class EndpointURLValidator(URLValidator):
    """Django's URL check, also taking a host name of one label: a Docker service's or a LAN machine's
    (http://ollama:11434/v1), which Django's wants a dot in, and labels with underscores."""

    regex = re.compile(
        _DJANGO_URL_RE.pattern.replace(
            URLValidator.host_re, "(" + _LABEL_RE + _LABELS_RE + URLValidator.tld_re + "|" + _LABEL_RE + ")"
        ),
        re.IGNORECASE,
    )
