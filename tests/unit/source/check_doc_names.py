"""Docs that hold: every path into the tree and every C++ name the docs quote in backticks is
there. A quoted path that starts at one of the tree's folders (`orchestrator/serve/src/x.cpp`,
`worker/_call.py` under python/comfy_orch, `orchestrator/.../x.hpp`) must match a file whose
path ends with it; a quoted qualified name (`host_runtime::start`, `orch::serve::server`,
`comfy_orch::node_abi`) must have its last two parts in one source or CMake file (a member
where its class is) and every other part in some file; and the names quoted in parentheses after
a quoted source (`orchestrator/runtime/src/supervisor.cpp` (`lose`, `check_heartbeats`), as
docs/architecture.md's table has them) must be in that source. Names
of ComfyUI's files, or of files the project makes at run time, are not checked. Usage:
check_doc_names.py SOURCE_DIR [--self-test]"""

import pathlib
import re
import sys

DOCS = ["README.md", "docs"]
TOP = ["support", "ipc", "plugins", "manifests", "worker", "orchestrator", "python", "tests",
       "bench", "examples", "scripts", "cmake", ".ci", "docs"]
SCANNED = (".cpp", ".hpp", ".h", ".c", ".py", ".cmake", ".txt", ".in")
QUOTED = re.compile(r"`([^`\n]+)`")
PATH = re.compile(r"^[\w.+-]+(?:/[\w.+-]+)+/?$")
QUALIFIED = re.compile(r"^(?:[A-Za-z_]\w*::)+~?[A-Za-z_]\w*(?:\(\))?$")
# `a/b/file.cpp` (`name`, `name`): the names this source holds.
FILE_NAMES = re.compile(r"`([\w./+-]+\.(?:cpp|hpp|h))` \(((?:`[^`]+`(?:, | and )?)+)\)")
IDENTIFIER = re.compile(r"^~?[A-Za-z_]\w*(?:\(\))?$")
WORD = re.compile(r"[A-Za-z_]\w*")
# A comment can be as stale as a doc: only code declares.
COMMENT = {".cpp": re.compile(r"//.*$", re.M), ".hpp": re.compile(r"//.*$", re.M),
           ".h": re.compile(r"//.*$", re.M), ".py": re.compile(r"#.*$", re.M)}


def tree_facts(root):
    """Every file's path under the tree's folders, and the words of each source."""
    paths, words, by_path = [], [], {}
    for top in TOP:
        for path in (root / top).rglob("*"):
            if "node_modules" in path.parts or "__pycache__" in path.parts:
                continue
            paths.append(path.relative_to(root).as_posix() + ("/" if path.is_dir() else ""))
            if path.resolve() == pathlib.Path(__file__).resolve():
                continue  # its own planted names declare nothing
            if path.is_file() and (path.suffix in SCANNED or path.name == "CMakeLists.txt"):
                text = path.read_text(errors="replace")
                if path.suffix in COMMENT:
                    text = COMMENT[path.suffix].sub("", text)
                words.append(set(WORD.findall(text)))
                by_path[path.relative_to(root).as_posix()] = words[-1]
    return paths, words, by_path


def path_found(quoted, paths):
    """`quoted` is the end of some file's path; `...` stands for any folders."""
    pattern = re.escape(quoted.rstrip("/")).replace(re.escape("..."), ".+")
    matcher = re.compile(r"(?:^|/)" + pattern + "/?$")
    return any(matcher.search(p) for p in paths)


def stale(root, texts):
    paths, words, by_path = tree_facts(root)
    every_word = set().union(*words)
    found = []
    for where, text in texts:
        for number, line in enumerate(text.splitlines(), 1):
            for quoted in (q.strip() for q in QUOTED.findall(line)):
                if QUALIFIED.match(quoted):
                    parts = [p.lstrip("~") for p in quoted.rstrip("()").split("::")]
                    gone = [p for p in parts if p not in every_word]
                    if not gone and len(parts) > 1 and \
                            not any(parts[-2] in w and parts[-1] in w for w in words):
                        gone = ["%s with %s" % (parts[-1], parts[-2])]
                    if gone:
                        found.append("%s:%d: `%s`: no source declares %s" % (
                            where, number, quoted, ", ".join(gone)))
                elif PATH.match(quoted.replace(".../", "x/")) and \
                        quoted.split("/")[0] in TOP and not path_found(quoted, paths):
                    found.append("%s:%d: `%s` is not in the tree" % (where, number, quoted))
            for source, names in FILE_NAMES.findall(line):
                held = [w for p, w in by_path.items() if p == source or p.endswith("/" + source)]
                if len(held) != 1:
                    continue  # a bare name of several files, or a file checked above
                for name in re.findall(r"`([^`]+)`", names):
                    if IDENTIFIER.match(name) and name.lstrip("~").rstrip("()") not in held[0]:
                        found.append("%s:%d: `%s` is not in %s" % (where, number, name, source))
    return found


def main():
    root = pathlib.Path(sys.argv[1])
    texts = []
    for entry in DOCS:
        files = [root / entry] if (root / entry).is_file() else sorted((root / entry).glob("*.md"))
        texts += [(str(p.relative_to(root)), p.read_text()) for p in files]
    if "--self-test" in sys.argv:
        # What a rename leaves behind: a member and a file the docs still name.
        planted = [("docs/planted.md",
                    "`host_runtime::no_such_member` in `orchestrator/runtime/src/no_such.cpp`; "
                    "`orchestrator/runtime/src/supervisor.cpp` (`lose`, `no_such_function`)")]
        found = stale(root, planted)
        if len(found) != 3:
            print("the docs' names check missed a stale name: %s" % found)
            return 1
        print("the docs' names check fails on a name the tree lacks, as it must")
        return 0
    found = stale(root, texts)
    for f in found:
        print(f)
    if found:
        print("%d stale names: rename them in the docs as in the code" % len(found))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
