import sys

from areal_conf.cli import main

sys.exit(main())
