import sys

from stormpy.bench.cli import main

sys.exit(main())
