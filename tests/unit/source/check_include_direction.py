"""Includes run one way (docs/architecture.md, "Libraries"): a library's files include only
its own headers and those of the libraries it uses, directly or through another. A header's
library is its include prefix (`orch/runtime/...` is runtime's); a bare name is a private header
beside the includer. Usage: check_include_direction.py SOURCE_DIR [--self-test]"""

import pathlib
import re
import shutil
import sys
import tempfile

# Each library, the folder its files are in, and the libraries it uses.
LIBRARIES = {
    "support": ("support", []),
    "plugin": ("plugins/include", []),  # the plugin C ABI headers
    # Plugins link nothing of the host's: support's header-only code alone (plugins/CMakeLists.txt).
    "plugin_modules": ("plugins/src", ["plugin", "support"]),
    "ipc": ("ipc", ["support"]),
    "manifests": ("manifests", ["support"]),
    "plugins": ("plugins/host", ["plugin", "ipc", "support"]),
    "worker": ("worker", ["plugins", "ipc", "manifests", "support", "plugin"]),
    "process": ("orchestrator/process", ["support", "ipc", "plugins", "manifests"]),
    "control": ("orchestrator/control", ["support", "ipc", "plugins", "manifests"]),
    "runtime": ("orchestrator/runtime", ["process"]),
    "executor": ("orchestrator/executor", ["runtime"]),
    "live": ("orchestrator/live", ["runtime"]),
    "envs": ("orchestrator/envs", ["runtime", "control"]),
    "serve": ("orchestrator/serve", ["executor", "live", "control"]),
    "host": ("orchestrator/host_api", ["executor", "live"]),
    "cli": ("orchestrator/cli", ["serve", "envs", "host", "control"]),
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def uses(name, seen=None):
    """The libraries `name` may include: itself and all it uses, transitively."""
    seen = set() if seen is None else seen
    if name not in seen:
        seen.add(name)
        for used in LIBRARIES[name][1]:
            uses(used, seen)
    return seen


def owner(spec):
    """The library of an include like `orch/<library>/x.hpp`; None for a private header."""
    parts = spec.split("/")
    if len(parts) >= 3 and parts[0] == "orch":
        return {"plugin": "plugin", "plugins": "plugins"}.get(parts[1], parts[1])
    return None


def violations(root):
    found = []
    for name, (folder, _) in LIBRARIES.items():
        allowed = uses(name)
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in (".cpp", ".hpp", ".h", ".c"):
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                target = owner(match.group(1))
                if target is None:
                    continue
                if target not in LIBRARIES:
                    found.append("%s:%d: includes %s, of no known library" % (
                        path.relative_to(root), number, match.group(1)))
                elif target not in allowed:
                    found.append("%s:%d: %s includes %s, but %s does not use %s" % (
                        path.relative_to(root), number, name, match.group(1), name, target))
    return found


def self_test(root):
    """The check fails on a tree where process includes serve, as it must."""
    with tempfile.TemporaryDirectory() as scratch:
        copy = pathlib.Path(scratch)
        for _, (folder, _) in LIBRARIES.items():
            if not (copy / folder).exists():
                shutil.copytree(root / folder, copy / folder)
        planted = copy / "orchestrator/process/src/child_process.cpp"
        planted.write_text('#include "orch/serve/serve_http.hpp"\n' + planted.read_text())
        found = violations(copy)
        if not any("child_process.cpp:1: process includes orch/serve" in f for f in found):
            print("the direction check missed an include of serve from process: %s" % found)
            return 1
    print("the direction check fails on a planted wrong-way include, as it must")
    return 0


def main():
    root = pathlib.Path(sys.argv[1])
    if "--self-test" in sys.argv:
        return self_test(root)
    found = violations(root)
    for f in found:
        print(f)
    if found:
        print("includes that run against the direction of docs/architecture.md (\"Libraries\"):"
              " move the code to the library that may use both, or pass what it needs in")
        return 1
    print("every include runs one way")
    return 0


if __name__ == "__main__":
    sys.exit(main())
