"""`make bench`: every benchmark in one run, printed as one table (bench/suite.py)."""

from __future__ import annotations

import sys

from bench.suite import main

sys.exit(main())
