"""The surface canary (docs/comfyui.md): does this ComfyUI have every member comfy-orch relies on?

    python -m comfy_orch.comfyui.check <ComfyUI root> [--json]

Imports ComfyUI's comfy.cli_args, comfy.model_management, comfy.model_patcher and comfy.utils from
<root> (as ComfyUI itself would with its default arguments, or with --cpu) and checks each
declared member by name before anything is patched. A module that does not import is named with
its exception and the likely fix (--cpu on a machine without CUDA, a missing package), never
reported as members missing for no said reason. Exit status: 0 when every fatal member is present
(missing degrade members are listed with the feature they turn off), 1 when one is missing or a
module does not import (comfy-orch would refuse to patch this ComfyUI), 2 when <root> is not a
ComfyUI tree."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from .._shared import import_hooks
from . import _surface


def likely_fix(exc: BaseException) -> str:
    """What to do about a ComfyUI module that did not import."""
    text = str(exc)
    if "CUDA" in text or "cuda" in text:
        return ("this machine has no CUDA device for ComfyUI, which then runs with --cpu: check "
                "it the same way, `python -m comfy_orch.comfyui.check <root> --cpu`")
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return ("install the package that provides %r into this interpreter (ComfyUI's "
                "requirements.txt), or run the check with ComfyUI's own Python" % exc.name)
    return "run ComfyUI itself once to see the full error; fix that first"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m comfy_orch.comfyui.check",
        description="Check that a ComfyUI tree has every member comfy-orch's integration uses.")
    parser.add_argument("root", help="the ComfyUI tree (the directory holding comfy/)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--cpu", action="store_true",
                        help="import ComfyUI as `main.py --cpu` would (a machine without CUDA)")
    options = parser.parse_args(argv)
    root = os.path.abspath(options.root)
    if not os.path.isdir(os.path.join(root, "comfy")):
        print("error: %s is not a ComfyUI tree (it has no comfy/ directory); give the directory "
              "holding ComfyUI's main.py" % root, file=sys.stderr)
        return 2
    sys.path.insert(0, root)
    if options.cpu:
        import_hooks.after_import("comfy.cli_args", lambda m: setattr(m.args, "cpu", True))
    errors: dict[str, BaseException] = {}
    report = _surface.check(import_missing=True, errors=errors)
    fatal = _surface.missing(report, _surface.FATAL)
    failed = [{"module": m, "error": "%s: %s" % (type(e).__name__, e), "fix": likely_fix(e)}
              for m, e in errors.items()]
    if options.json:
        print(json.dumps({"root": root, "ok": not fatal and not failed, "import_errors": failed,
                          "members": [{"module": m, "member": name, "severity": sev, "use": use,
                                       "present": present}
                                      for m, name, sev, use, present in report]}, indent=2))
    else:
        for f in failed:
            print("cannot import %s: %s\n  fix: %s" % (f["module"], f["error"], f["fix"]))
        for m, name, sev, use, present in report:
            if m not in errors:
                print("%-8s %-7s %s.%s  (%s)" % ("ok" if present else "MISSING", sev, m, name,
                                                 use))
        if failed:
            print("comfy-orch cannot check this ComfyUI: %s did not import (above)"
                  % ", ".join(f["module"] for f in failed))
        elif fatal:
            print("comfy-orch will not patch this ComfyUI: missing %s. Update ComfyUI, or run "
                  "its packs without comfy-orch." % ", ".join(fatal))
        else:
            print("ok: comfy-orch can patch this ComfyUI")
    return 1 if fatal or failed else 0


if __name__ == "__main__":
    sys.exit(main())
