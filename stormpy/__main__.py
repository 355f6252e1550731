import sys

from stormpy.cli import main

sys.exit(main())
