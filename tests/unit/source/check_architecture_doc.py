"""Every library source is named in docs/architecture.md, so that a reader finds each behaviour
there: a .cpp of support/, ipc/, plugins/host/, manifests/, worker/ or a library of
orchestrator/ (by file name, as the table names them). Every library of the graph
(cmake/library_graph.txt) has its row in "Libraries", and the row's "uses" column is the
graph's. Usage: check_architecture_doc.py SOURCE_DIR [--self-test]"""

import pathlib
import re
import sys

LIBRARIES = ["support/src", "ipc/src", "plugins/host/src", "manifests/src", "worker/src"]
GRAPH = "cmake/library_graph.txt"
# A row of "Libraries": | `folder/` | library | what it is | public face | uses |
ROW = re.compile(r"^\| `([^`]+)/` \|.*\| ([^|]+) \|$", re.M)


def graph(root):
    """{folder: set of the libraries it uses}, from the graph's file."""
    found = {}
    for line in (root / GRAPH).read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            _, folder, _, *used = line.split()
            found[folder] = set(used)
    return found


def uses_mismatches(root, doc):
    section = doc.split("## Libraries", 1)[-1].split("\n## ", 1)[0]
    rows = {m.group(1): m.group(2).strip() for m in ROW.finditer(section)}
    missing = []
    for folder, used in graph(root).items():
        if folder not in rows:
            missing.append("docs/architecture.md's \"Libraries\" has no row for %s/" % folder)
            continue
        said = {u.strip() for u in rows[folder].split(",")} - {"—", ""}
        if said != used:
            missing.append("docs/architecture.md's \"Libraries\" says %s/ uses %s; %s says %s" % (
                folder, ", ".join(sorted(said)) or "nothing", GRAPH,
                ", ".join(sorted(used)) or "nothing"))
    return missing


def missing_names(root, doc):
    libraries = LIBRARIES + sorted("orchestrator/%s/src" % d.name
                                   for d in (root / "orchestrator").iterdir() if d.is_dir())
    sources = [p for d in libraries for p in sorted((root / d).glob("*.cpp"))]
    missing = ["docs/architecture.md does not name %s: add it to the row of its behaviour"
               % p.relative_to(root) for p in sources if p.name not in doc]
    missing += ["docs/architecture.md's \"Libraries\" has no row for orchestrator/%s/" % d
                for d in [pathlib.Path(x).parent.name for x in libraries
                          if x.startswith("orchestrator/")]
                if "| `orchestrator/%s/`" % d not in doc]
    if len(sources) < 100:
        missing.append("only %d library sources found under %s" % (len(sources), root))
    return missing + uses_mismatches(root, doc)


def main():
    root = pathlib.Path(sys.argv[1])
    doc = (root / "docs/architecture.md").read_text()
    if "--self-test" in sys.argv:
        # A doc without one source's name, as after adding a source and forgetting the doc.
        name = "supervisor_router.cpp"
        found = missing_names(root, doc.replace(name, "a-source-the-doc-forgot"))
        if not any(name in m for m in found):
            print("the architecture-doc check missed a source the doc does not name")
            return 1
        # A doc whose graph is not the file's, as after changing one and not the other.
        row = re.search(r"^\| `orchestrator/serve/` \|.*$", doc, re.M).group(0)
        found = missing_names(root, doc.replace(row, row[:row.rindex("|", 0, -1)] + "| control |"))
        if not any("says orchestrator/serve/ uses control" in m for m in found):
            print("the architecture-doc check missed a \"uses\" column that is not the graph's")
            return 1
        print("the architecture-doc check fails when a source is not named, and when the doc's "
              "graph is not cmake/library_graph.txt's, as it must")
        return 0
    found = missing_names(root, doc)
    for m in found:
        print(m)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
