import sys

from reportgen.cli.main import main

sys.exit(main())
