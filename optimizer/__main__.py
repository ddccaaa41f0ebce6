"""`python -m optimizer ...`: see `optimizer.cli`."""

import sys

from .cli import main

sys.exit(main())
