"""Runs one of the pinned Python tools of the tests with this interpreter (/usr/bin/python3, what
Python workers run on), from .deps/pytools where scripts/install-deps installs them
(docs/python.md, "Checks"):

    run_tool.py mypy [--cache-dir DIR]   mypy --strict over python/ and tests/python
    run_tool.py pytest [ARGS...]         the unit tests in tests/python

Where the tools are missing, or older than scripts/pypi-pins.txt, it fails saying to run
./scripts/install-deps: a check that did not run must not pass. Nothing is written into the
source tree (no .mypy_cache, .pytest_cache or __pycache__)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ROOT / ".deps" / "pytools"
PINS = ROOT / "scripts" / "pypi-pins.txt"
MARK = "# -- tools --"  # scripts/install-deps installs the pins after this line


def _missing(tool: str) -> str | None:
    """Why the pinned tools cannot run, or None."""
    if not (TOOLS / tool / "__init__.py").is_file():
        return "%s is not installed in %s" % (tool, TOOLS)
    lines = PINS.read_text().splitlines()
    wanted = "\n".join(lines[lines.index(MARK):]) if MARK in lines else ""
    stamp = TOOLS / ".pins"
    installed = stamp.read_text().rstrip("\n") if stamp.is_file() else ""
    if installed != wanted.rstrip("\n"):
        return "%s holds other versions than %s pins" % (TOOLS, PINS.relative_to(ROOT))
    return None


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("mypy", "pytest"):
        print(__doc__, file=sys.stderr)
        return 2
    tool, args = argv[0], argv[1:]
    why = _missing(tool)
    if why is not None:
        print("%s: %s; run ./scripts/install-deps (it downloads the pinned mypy and pytest, "
              "checks their hashes and installs them into .deps/pytools)" % (tool, why),
              file=sys.stderr)
        return 1
    env = dict(os.environ, PYTHONPATH=str(TOOLS), PYTHONDONTWRITEBYTECODE="1",
               PYTHONNOUSERSITE="1", PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    if tool == "mypy":
        cache = Path(tempfile.gettempdir()) / "comfy-orch-mypy-cache"
        if args[:1] == ["--cache-dir"] and len(args) > 1:
            cache, args = Path(args[1]), args[2:]
        command = [sys.executable, "-m", "mypy", "--config-file", "python/pyproject.toml",
                   "--cache-dir", str(cache), "python/comfy_orch", "python/comfy_env",
                   "tests/python", *args]
    else:
        command = [sys.executable, "-m", "pytest", "-c", "tests/python/pytest.ini",
                   "tests/python", *args]
    return subprocess.run(command, cwd=ROOT, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
