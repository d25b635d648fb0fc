import sys

from coursekit.portfolio.report import main

sys.exit(main())
