"""``python -m lmk_rag.cli``: the ``lmk-rag`` command."""

import sys

from .main import main

sys.exit(main())
