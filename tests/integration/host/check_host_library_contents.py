"""liborch_host.so, which ComfyUI loads, holds only what host_api uses (docs/architecture.md,
"Libraries"): none of the functions and data that the archives of the other libraries, or the
CLI's own code, define is among the symbols the library exports or defines, its hidden ones
included (the version script makes every symbol but the C API's local, and a local one is
linked in all the same).
Usage: check_host_library_contents.py LIBORCH_HOST.so ARCHIVE... -- EXECUTABLE"""

import subprocess
import sys

STRONG = set("TDBR")  # code and data that one object alone defines (not inline, not templates)


def defined(path, kinds=STRONG, dynamic=False):
    """Demangled names of the symbols `path` defines of `kinds` (any, when None)."""
    args = ["nm", "-C", "--defined-only"] + (["-D"] if dynamic else []) + [path]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    names = set()
    for line in out.splitlines():
        fields = line.split(" ", 2)
        if len(fields) == 3 and (kinds is None or fields[1] in kinds):
            names.add(fields[2])
    return names


def main():
    library, rest = sys.argv[1], sys.argv[2:]
    split = rest.index("--")
    archives, executable = rest[:split], rest[split + 1]
    outside = set()
    for archive in archives:
        outside |= {n for n in defined(archive) if n.startswith("orch::")}
    # The CLI's own code: what the executable defines in orch::cli.
    outside |= {n for n in defined(executable) if n.startswith("orch::cli::")}
    # In the library, global or made local by the version script: code and data alike.
    exported = defined(library, kinds=None, dynamic=True)
    inside = defined(library, kinds=STRONG | {k.lower() for k in STRONG})
    if len(outside) < 100:
        print("only %d symbols found in %s: not the libraries meant" % (len(outside), archives))
        return 1
    leaked = sorted(outside & (exported | inside))
    for name in leaked[:40]:
        print("liborch_host.so defines %s, which belongs to a library host_api does not use"
              % name)
    if leaked:
        print("%d such symbols: move the code to the library of its audience, or link that"
              " library into comfy-orch, not into orch_host_shared" % len(leaked))
        return 1
    print("liborch_host.so holds none of the %d symbols of the libraries host_api does not use"
          " and of the CLI" % len(outside))
    return 0


if __name__ == "__main__":
    sys.exit(main())
