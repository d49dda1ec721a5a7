"""``python -m mc2fmu``: the command line, as the ``mc2fmu`` script."""

import sys

from .cli import main

sys.exit(main())
