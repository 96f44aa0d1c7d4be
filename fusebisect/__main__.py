import sys

from fusebisect.cli.app import main

sys.exit(main())
