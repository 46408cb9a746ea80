"""The comfy_env drop-in against the real comfy-env from PyPI, name by name (docs/comfyui.md,
"The comfy_env drop-in"):

    python3 compare_surface.py <comfy-env wheel> <comfy-orch's python/ directory>

Installs the wheel (pinned and hash-checked by scripts/install-deps, never fetched here) into a
throwaway venv that sees Debian's numpy, tomli and tomli-w, and reads there the real package's
public names: __all__ and the module each is defined in, and each one's signature. Then reads
the same of the drop-in in a process of its own, and compares: every public name exported, at
the same module paths, with a compatible signature (the same parameters in the same order and
kind, the same defaults; the drop-in may only add parameters with defaults at the end).
Prints one line per name and "N passed, N failed"; exits 1 on any difference."""

import json
import os
import subprocess
import sys
import tempfile

READ = r"""
import importlib, inspect, json, sys
sys.path.insert(0, sys.argv[1]) if len(sys.argv) > 1 else None
import comfy_env
out = {"all": list(comfy_env.__all__), "names": {}}
for name in comfy_env.__all__:
    obj = getattr(comfy_env, name)
    params = [[p.name, str(p.kind), p.default is not inspect.Parameter.empty,
               repr(p.default) if p.default is not inspect.Parameter.empty else None]
              for p in inspect.signature(obj).parameters.values()]
    out["names"][name] = {"module": obj.__module__, "params": params}
print(json.dumps(out))
"""

IMPORTS = r"""
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
paths = json.loads(sys.argv[2])
missing = []
for module, name in paths:
    try:
        getattr(importlib.import_module(module), name)
    except Exception as e:
        missing.append("%s.%s: %s" % (module, name, e))
print(json.dumps(missing))
"""


def read(python, *args):
    done = subprocess.run([python, "-c", READ, *args], capture_output=True, text=True,
                          timeout=120)
    if done.returncode != 0:
        raise SystemExit("reading comfy_env with %s failed:\n%s" % (python, done.stderr))
    return json.loads(done.stdout)


def compatible(real, ours):
    """Why `ours` cannot stand for `real` (signatures as read above), or None."""
    for k, (name, kind, has_default, default) in enumerate(real):
        if k >= len(ours):
            return "lacks parameter %r" % name
        o = ours[k]
        if (o[0], o[1], o[2]) != (name, kind, has_default):
            return "parameter %d is %r (%s), the real one %r (%s)" % (k, o[0], o[1], name, kind)
        if has_default and o[3] != default:
            return "%r defaults to %s, the real one to %s" % (name, o[3], default)
    extra = [o for o in ours[len(real):] if not o[2] and "VAR" not in o[1]]
    return "adds required parameters %s" % [o[0] for o in extra] if extra else None


def main():
    wheel, package_root = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory(prefix="orch-comfy-env-") as venv:
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv],
                       check=True, timeout=120)
        python = os.path.join(venv, "bin", "python")
        subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                        "--no-compile", wheel], check=True, timeout=300)
        real = read(python)
    ours = read("/usr/bin/python3", package_root)
    passed = failed = 0

    def verdict(ok, line):
        nonlocal passed, failed
        passed, failed = passed + ok, failed + (not ok)
        print(("ok      " if ok else "FAILED  ") + line)

    for name in real["all"]:
        verdict(name in ours["all"], "comfy_env.__all__ has %s" % name)
        if name not in ours["names"]:
            continue
        why = compatible(real["names"][name]["params"], ours["names"][name]["params"])
        verdict(why is None, "comfy_env.%s%s" % (name, ": " + why if why else
                                                 " has a compatible signature"))
    # The module each name is defined in, where packs import it from.
    paths = [[real["names"][n]["module"], n] for n in real["all"]]
    done = subprocess.run(["/usr/bin/python3", "-c", IMPORTS, package_root, json.dumps(paths)],
                          capture_output=True, text=True, timeout=120)
    missing = json.loads(done.stdout) if done.returncode == 0 else [done.stderr]
    for module, name in paths:
        bad = [m for m in missing if m.startswith("%s.%s:" % (module, name))]
        verdict(not bad, "from %s import %s%s" % (module, name, ": " + bad[0] if bad else ""))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
