"""Every constant python/comfy_orch/_shared/abi.py copies from a C header has the header's value:
NAME is ORCH_NAME there (STATUS_NAME is ORCH_NAME, plugin.h's orch_status). The Python package
reads the ABIs' numbers from abi.py alone, so a header that changes without it fails here, not in
a worker. Usage: check_abi_constants.py SOURCE_DIR"""

import ast
import pathlib
import re
import sys

HEADERS = ["worker/include/orch/worker/nodes.h", "worker/include/orch/worker/worker.h",
           "plugins/include/orch/plugin/plugin.h", "orchestrator/host_api/include/orch/host/host.h"]
# Constants abi.py takes from elsewhere than a header's #define, and where.
NOT_FROM_A_HEADER = {"MAX_VALUE_DEPTH": "worker/src/node_values.cpp"}


def header_macros(root, header):
    text = (root / header).read_text().replace("\\\n", " ")
    return {name: int(value)
            for name, value in re.findall(r"^#define (ORCH_\w+)\s+(\d+)u?\b", text, re.M)}


def python_constants(path):
    constants = {}
    for node in ast.parse(path.read_text()).body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id.isupper()
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, int)):
            constants[node.targets[0].id] = node.value.value
    return constants


def main():
    root = pathlib.Path(sys.argv[1])
    macros = {}
    for header in HEADERS:
        macros.update(header_macros(root, header))
    wrong = []
    constants = python_constants(root / "python/comfy_orch/_shared/abi.py")
    for name, value in sorted(constants.items()):
        if name in NOT_FROM_A_HEADER:
            continue
        macro = "ORCH_" + (name[len("STATUS_"):] if name.startswith("STATUS_") else name)
        if macro not in macros:
            wrong.append("%s: no #define %s in %s" % (name, macro, ", ".join(HEADERS)))
        elif macros[macro] != value:
            wrong.append("%s = %d, but %s is %d" % (name, value, macro, macros[macro]))
    for name, value in sorted(header_macros(root, HEADERS[-1]).items()):  # every host code
        if name[len("ORCH_"):] not in constants:
            wrong.append("%s (%d) has no constant in abi.py" % (name, value))
    if len(constants) < 20 or "HOST_RETRYABLE" not in constants:
        wrong.append("abi.py's constants were not read (%d found)" % len(constants))
    for line in wrong:
        print("python/comfy_orch/_shared/abi.py: " + line)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
