"""`python -m use.cli`: the same as `python -m use` and the `use` console script (`use.cli:main`)."""

from __future__ import annotations

import sys

from use.cli import main

if __name__ == "__main__":
    sys.exit(main())
