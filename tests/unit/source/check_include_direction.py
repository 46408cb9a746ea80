"""Includes run one way (docs/architecture.md, "Libraries"), as the graph in
cmake/library_graph.txt says: a library's files include only its own headers and those of the
libraries it uses, directly or through another; every use the graph declares is needed by an
include of the library's own files (a graph that allows more than the code does stops saying
what the code is); and a library declares names only in its own namespace, `orch::<library>` (or
one nested in it). A header's library is the one whose folder holds its include prefix
(`orch/runtime/...` is runtime's, `orch/host/...` host_api's); a bare name is a private header
beside the includer. Usage: check_include_direction.py SOURCE_DIR [--self-test]"""

import pathlib
import re
import shutil
import sys
import tempfile

GRAPH = "cmake/library_graph.txt"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# `namespace orch::x...` and `namespace orch { namespace x`, not an alias (`namespace fs = ...`).
NAMESPACE = re.compile(r"\bnamespace\s+orch\s*(?:::\s*|\{\s*namespace\s+)([A-Za-z_]\w*)")
SOURCES = (".cpp", ".hpp", ".h", ".c")


def read_graph(root):
    """{library: (folder, namespace or None, [libraries it uses])}, from the graph's file."""
    libraries = {}
    for line in (root / GRAPH).read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, folder, namespace, *used = line.split()
        libraries[name] = (folder, None if namespace == "-" else namespace, used)
    return libraries


def uses(libraries, name, seen=None):
    """The libraries `name` may include: itself and all it uses, transitively."""
    seen = set() if seen is None else seen
    if name not in seen:
        seen.add(name)
        for used in libraries[name][2]:
            uses(libraries, used, seen)
    return seen


def prefixes(root, libraries):
    """{include prefix: library}: `orch/<prefix>/` is the library whose folder holds it."""
    found = {}
    for name, (folder, _, _) in libraries.items():
        for base in (root / folder, root / folder / "include"):
            for d in sorted((base / "orch").glob("*/")):
                if d.is_dir():
                    found[d.name] = name
    return found


def files_of(root, folder):
    return [p for p in sorted((root / folder).rglob("*")) if p.suffix in SOURCES]


def violations(root):
    libraries = read_graph(root)
    owners = prefixes(root, libraries)
    found = []
    for name, (folder, namespace, used) in libraries.items():
        allowed = uses(libraries, name)
        included = set()
        for path in files_of(root, folder):
            text = path.read_text()
            where = path.relative_to(root)
            for number, line in enumerate(text.splitlines(), 1):
                match = INCLUDE.match(line)
                if not match:
                    continue
                parts = match.group(1).split("/")
                if len(parts) < 3 or parts[0] != "orch":
                    continue  # a private header beside the includer
                target = owners.get(parts[1])
                if target is None:
                    found.append("%s:%d: includes %s, of no known library" % (
                        where, number, match.group(1)))
                elif target not in allowed:
                    found.append("%s:%d: %s includes %s, but %s does not use %s" % (
                        where, number, name, match.group(1), name, target))
                else:
                    included.add(target)
            if namespace is None:
                continue
            for match in NAMESPACE.finditer(text):
                if match.group(1) != namespace:
                    number = text.count("\n", 0, match.start()) + 1
                    found.append("%s:%d: %s declares namespace orch::%s, not its own orch::%s" % (
                        where, number, name, match.group(1), namespace))
        # A use no include needs: of what it reaches, the library includes nothing, or nothing
        # that its other uses do not reach too.
        for u in used:
            others = set().union(set(), *[uses(libraries, o) for o in used if o != u])
            if not included & (uses(libraries, u) - others):
                found.append("%s: %s uses %s, but no include of %s needs it (it includes nothing"
                             " that only %s reaches): drop the use" % (GRAPH, name, u, name, u))
    return found


def planted(root, scratch, plant):
    """The violations of a copy of the tree's libraries with `plant(copy)` done to it."""
    copy = pathlib.Path(scratch)
    (copy / GRAPH).parent.mkdir(parents=True)
    shutil.copy(root / GRAPH, copy / GRAPH)
    for folder, _, _ in read_graph(root).values():
        if not (copy / folder).exists():
            shutil.copytree(root / folder, copy / folder)
    plant(copy)
    return violations(copy)


def prepend(path, line):
    path.write_text(line + "\n" + path.read_text())


def self_test(root):
    """The check fails where process includes serve, where process declares serve's namespace,
    and where the graph gives process a use it has no include for, as it must."""
    cases = [
        ("a wrong-way include",
         lambda c: prepend(c / "orchestrator/process/src/child_process.cpp",
                           '#include "orch/serve/serve_http.hpp"'),
         "child_process.cpp:1: process includes orch/serve"),
        ("a namespace of another library",
         lambda c: prepend(c / "orchestrator/process/src/child_process.cpp",
                           "namespace orch::serve { int planted; }"),
         "child_process.cpp:1: process declares namespace orch::serve"),
        ("a namespace of another library, nested",
         lambda c: prepend(c / "orchestrator/process/src/child_process.cpp",
                           "namespace orch {\nnamespace runtime { int planted; }\n}"),
         "child_process.cpp:1: process declares namespace orch::runtime"),
        ("a use no include needs",
         lambda c: (c / GRAPH).write_text(re.sub(
             r"(?m)^(process\s.*)$", r"\1 manifests", (c / GRAPH).read_text())),
         "process uses manifests, but no include of process needs it"),
    ]
    for what, plant, expected in cases:
        with tempfile.TemporaryDirectory() as scratch:
            found = planted(root, scratch, plant)
        if not any(expected in f for f in found):
            print("the direction check missed %s: %s" % (what, found))
            return 1
        print("the direction check fails on %s, as it must" % what)
    return 0


def main():
    root = pathlib.Path(sys.argv[1])
    if "--self-test" in sys.argv:
        return self_test(root)
    found = violations(root)
    for f in found:
        print(f)
    if found:
        print("the libraries break their graph (cmake/library_graph.txt, docs/architecture.md,"
              " \"Libraries\"): move the code to the library that may use both, pass what it"
              " needs in, or correct the graph")
        return 1
    print("every include runs one way, every use is needed, every namespace is its library's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
