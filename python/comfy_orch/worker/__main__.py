"""`python -m comfy_orch.worker`: the worker's entry (docs/python.md)."""

import sys

from . import main

sys.exit(main())
