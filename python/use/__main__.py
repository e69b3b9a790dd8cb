"""`python -m use`: the `use` command line where its console script is not on PATH (a checkout run
with PYTHONPATH, a virtualenv not activated). Same entry point as the script (`use.cli:main`)."""

from __future__ import annotations

import sys

from use.cli import main

if __name__ == "__main__":
    sys.exit(main())
