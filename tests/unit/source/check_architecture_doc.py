"""Every library source is named in docs/architecture.md, so that a reader finds each behaviour
there: a .cpp of support/, ipc/, plugins/host/, manifests/, worker/ or orchestrator/ (by file
name, as the table names them). Usage: check_architecture_doc.py SOURCE_DIR"""

import pathlib
import sys

LIBRARIES = ["support/src", "ipc/src", "plugins/host/src", "manifests/src", "worker/src",
             "orchestrator/src"]


def main():
    root = pathlib.Path(sys.argv[1])
    doc = (root / "docs/architecture.md").read_text()
    sources = [p for d in LIBRARIES for p in sorted((root / d).glob("*.cpp"))]
    missing = [p.relative_to(root) for p in sources if p.name not in doc]
    for p in missing:
        print("docs/architecture.md does not name %s: add it to the row of its behaviour" % p)
    if len(sources) < 100:
        print("only %d library sources found under %s" % (len(sources), root))
        return 1
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
