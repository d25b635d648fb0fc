import sys

from coursekit.provenance.tracking import main

sys.exit(main())
