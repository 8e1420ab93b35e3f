import sys

from runner.main import main

sys.exit(main())
