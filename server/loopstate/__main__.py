"""`python -m loopstate`: the same CLI as the `loopstate` script, for an interpreter that has
loopstate installed but whose `bin` is not on PATH (the VS Code extension's fallback)."""

import sys

from loopstate.cli.main import main

sys.exit(main())
