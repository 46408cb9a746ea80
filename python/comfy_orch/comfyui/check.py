"""The surface canary (docs/comfyui.md): does this ComfyUI have every member comfy-orch relies on?

    python -m comfy_orch.comfyui.check <ComfyUI root> [--json]

Imports ComfyUI's comfy.cli_args, comfy.model_management, comfy.model_patcher and comfy.utils from
<root> (as ComfyUI
itself would, without parsing its command line) and checks each declared member by name before
anything is patched. Exit status: 0 when every fatal member is present (missing degrade members
are listed with the feature they turn off), 1 when one is missing (comfy-orch would refuse to
patch this ComfyUI), 2 when <root> is not a ComfyUI tree."""

import argparse
import json
import os
import sys

from . import _surface


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m comfy_orch.comfyui.check",
        description="Check that a ComfyUI tree has every member comfy-orch's integration uses.")
    parser.add_argument("root", help="the ComfyUI tree (the directory holding comfy/)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    options = parser.parse_args(argv)
    root = os.path.abspath(options.root)
    if not os.path.isdir(os.path.join(root, "comfy")):
        print("error: %s is not a ComfyUI tree (it has no comfy/ directory); give the directory "
              "holding ComfyUI's main.py" % root, file=sys.stderr)
        return 2
    sys.path.insert(0, root)
    report = _surface.check(import_missing=True)
    fatal = _surface.missing(report, _surface.FATAL)
    if options.json:
        print(json.dumps({"root": root, "ok": not fatal,
                          "members": [{"module": m, "member": name, "severity": sev, "use": use,
                                       "present": present}
                                      for m, name, sev, use, present in report]}, indent=2))
    else:
        for m, name, sev, use, present in report:
            print("%-8s %-7s %s.%s  (%s)" % ("ok" if present else "MISSING", sev, m, name, use))
        if fatal:
            print("comfy-orch will not patch this ComfyUI: missing %s. Update ComfyUI, or run "
                  "its packs without comfy-orch." % ", ".join(fatal))
        else:
            print("ok: comfy-orch can patch this ComfyUI")
    return 1 if fatal else 0


if __name__ == "__main__":
    sys.exit(main())
