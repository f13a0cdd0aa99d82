"""``python -m gradlab``: the same command as the ``gradlab`` console script."""

import sys

from gradlab.cli import main

if __name__ == "__main__":
    sys.exit(main())
