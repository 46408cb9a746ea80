"""Where comfy-orch's libraries are (docs/python.md): the path in the variable the host sets
(ORCH_WORKER_LIBRARY, ORCH_HOST_LIBRARY), else beside the comfy_orch package (a pip install
copies them into it), else the installed prefix's lib/comfy-orch (`cmake --install` puts the
package in <prefix>/share/comfy-orch/python)."""

from __future__ import annotations

import os

# comfy_orch/, the package this module is part of.
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def candidates(name: str, variable: str) -> list[str]:
    """Where library `name` may be: $`variable`, beside this package, then the installed
    prefix's lib/comfy-orch."""
    found = []
    if os.environ.get(variable):
        found.append(os.environ[variable])
    found.append(os.path.join(PACKAGE_DIR, name))
    # <prefix>/share/comfy-orch/python/comfy_orch -> <prefix>/lib/comfy-orch
    prefix = os.path.normpath(os.path.join(PACKAGE_DIR, "..", "..", "..", ".."))
    found.append(os.path.join(prefix, "lib", "comfy-orch", name))
    return found
