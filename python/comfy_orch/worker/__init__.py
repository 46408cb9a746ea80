"""`python -m comfy_orch.worker`: a Python pack's worker (docs/python.md). The host starts it
with the native worker's flags plus --node-dir (the isolated node directory), --pack-dir and
optionally --comfyui-root. It imports the node directory as a package, reads its
NODE_CLASS_MAPPINGS, and serves those classes through liborch_worker.so (orch_worker_begin, whose
handshake runs while the pack imports, then orch_worker_serve): the same runtime as a native
worker, nodes executed on this (the main) thread.

The worker runtime's package: what runs a Python pack in its worker process. Node code uses
`import comfy_orch` (the package's top level), never these modules.

Importing the package imports none of its modules: ComfyUI's process imports comfy_orch for
comfy_orch.comfyui and must not load the worker's runtime (tests/python/test_imports.py). The
entry, `main`, is in _main.py and imported when called."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time: a worker's start pays for it
if TYPE_CHECKING:
    from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the worker with the host's command line; its exit status (_main.main)."""
    from ._main import main as run_worker
    return run_worker(argv)
