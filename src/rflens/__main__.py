import sys

from rflens.cli import main

sys.exit(main())
