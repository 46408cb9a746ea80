"""Loading liborch_worker.so (docs/python.md): the path the supervisor sets in
ORCH_WORKER_LIBRARY, else the library shipped beside the package (_shared/locate.py)."""

from __future__ import annotations

import ctypes
import os

from .._shared import abi, locate

_NAME = "liborch_worker.so"


def load() -> ctypes.CDLL:
    """The library with the signatures of the worker API functions this package calls."""
    tried = []
    for path in locate.candidates(_NAME, "ORCH_WORKER_LIBRARY"):
        if os.path.isfile(path):
            lib = ctypes.CDLL(path)
            if not hasattr(lib, "orch_worker_begin"):
                raise OSError("comfy_orch: %s is older than this package (it lacks "
                              "orch_worker_begin, ORCH_WORKER_1.1); use the library built with "
                              "it" % path)
            lib.orch_worker_begin.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
                                              ctypes.POINTER(ctypes.c_int32)]
            lib.orch_worker_begin.restype = ctypes.c_void_p
            lib.orch_worker_serve.argtypes = [ctypes.c_void_p, ctypes.POINTER(abi.NodeSet),
                                              ctypes.c_char_p]
            lib.orch_worker_serve.restype = ctypes.c_int32
            lib.orch_worker_log.argtypes = [ctypes.c_int32, ctypes.c_char_p]
            lib.orch_worker_log.restype = None
            return lib
        tried.append(path)
    raise OSError("comfy_orch: %s not found (tried %s); set ORCH_WORKER_LIBRARY to its path"
                  % (_NAME, ", ".join(tried)))
