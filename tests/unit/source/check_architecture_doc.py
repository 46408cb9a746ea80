"""Every library source is named in docs/architecture.md, so that a reader finds each behaviour
there: a .cpp of support/, ipc/, plugins/host/, manifests/, worker/ or a library of
orchestrator/ (by file name, as the table names them), and every orchestrator library has its
row in "Libraries". Usage: check_architecture_doc.py SOURCE_DIR [--self-test]"""

import pathlib
import sys

LIBRARIES = ["support/src", "ipc/src", "plugins/host/src", "manifests/src", "worker/src"]


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
    return missing


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
        print("the architecture-doc check fails when a source is not named, as it must")
        return 0
    found = missing_names(root, doc)
    for m in found:
        print(m)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
