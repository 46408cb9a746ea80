"""Finding and loading liborch_worker.so (docs/python.md): the path the supervisor sets in
ORCH_WORKER_LIBRARY, else the library shipped beside this package (a pip install copies it into
the package; `cmake --install` puts it in <prefix>/lib/comfy-orch)."""

import ctypes
import os

from . import _abi

_NAME = "liborch_worker.so"


def candidates(name=_NAME, variable="ORCH_WORKER_LIBRARY"):
    """Where library `name` may be: $`variable`, beside this package, then the installed
    prefix's lib/comfy-orch."""
    here = os.path.dirname(os.path.abspath(__file__))
    found = []
    if os.environ.get(variable):
        found.append(os.environ[variable])
    found.append(os.path.join(here, name))
    # <prefix>/share/comfy-orch/python/comfy_orch -> <prefix>/lib/comfy-orch
    prefix = os.path.normpath(os.path.join(here, "..", "..", "..", ".."))
    found.append(os.path.join(prefix, "lib", "comfy-orch", name))
    return found


def load():
    tried = []
    for path in candidates():
        if os.path.isfile(path):
            lib = ctypes.CDLL(path)
            if not hasattr(lib, "orch_worker_begin"):
                raise OSError("comfy_orch: %s is older than this package (it lacks "
                              "orch_worker_begin, ORCH_WORKER_1.1); use the library built with "
                              "it" % path)
            lib.orch_worker_begin.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
                                              ctypes.POINTER(ctypes.c_int32)]
            lib.orch_worker_begin.restype = ctypes.c_void_p
            lib.orch_worker_serve.argtypes = [ctypes.c_void_p, ctypes.POINTER(_abi.NodeSet),
                                              ctypes.c_char_p]
            lib.orch_worker_serve.restype = ctypes.c_int32
            lib.orch_worker_log.argtypes = [ctypes.c_int32, ctypes.c_char_p]
            lib.orch_worker_log.restype = None
            return lib
        tried.append(path)
    raise OSError("comfy_orch: %s not found (tried %s); set ORCH_WORKER_LIBRARY to its path"
                  % (_NAME, ", ".join(tried)))
