"""liborch_host.so through ctypes (docs/host-library.md; its C API is
orchestrator/host_api/include/orch/host/host.h): where it is, and the signatures of what this
package calls. The library's functions take and return JSON text, blocks and status codes."""

from __future__ import annotations

import ctypes
import os

from .._shared import locate

_NAME = "liborch_host.so"


class Block(ctypes.Structure):
    """orch_host_block: a pool block this process holds, mapped at `data` once mapped."""
    _fields_ = [("struct_size", ctypes.c_uint32), ("segment", ctypes.c_uint32),
                ("generation", ctypes.c_uint64), ("offset", ctypes.c_uint64),
                ("size", ctypes.c_uint64), ("data", ctypes.c_void_p)]
    struct_size: int
    segment: int
    generation: int
    offset: int
    size: int
    data: int | None


EventFn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)


class Options(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("reserved", ctypes.c_uint32),
                ("deployment", ctypes.c_char_p), ("on_event", EventFn),
                ("user", ctypes.c_void_p), ("worker_executable", ctypes.c_char_p),
                ("comfyui", ctypes.c_char_p)]  # ORCH_HOST_2


def load_library() -> ctypes.CDLL:
    """The library, from ORCH_HOST_LIBRARY or beside the package (_shared/locate.py)."""
    tried = locate.candidates(_NAME, "ORCH_HOST_LIBRARY")
    for path in tried:
        if os.path.isfile(path):
            break
    else:
        raise OSError("comfy_orch: %s not found (tried %s); set ORCH_HOST_LIBRARY to its path"
                      % (_NAME, ", ".join(tried)))
    lib = ctypes.CDLL(path)
    text, host, out = ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)
    signatures: dict[str, tuple[type | None, list[type]]] = {
        "orch_host_start": (ctypes.c_int32, [ctypes.POINTER(Options), out, out]),
        "orch_host_nodes": (ctypes.c_void_p, [host]),
        "orch_host_begin_prompt": (ctypes.c_uint64, [host]),
        "orch_host_call": (ctypes.c_int32, [host, text, out]),
        "orch_host_allocate": (ctypes.c_int32, [host, ctypes.c_uint64, ctypes.POINTER(Block)]),
        "orch_host_map": (ctypes.c_int32, [host, ctypes.POINTER(Block)]),
        "orch_host_release": (ctypes.c_int32, [host, ctypes.POINTER(Block)]),
        "orch_host_free": (ctypes.c_void_p, [host, ctypes.c_int32, ctypes.c_int32]),
        "orch_host_status": (ctypes.c_void_p, [host]),
        "orch_host_models": (ctypes.c_void_p, [host]),
        "orch_host_pinned_reserve": (ctypes.c_int32, [host, ctypes.c_uint64]),
        "orch_host_pinned_release": (None, [host, ctypes.c_uint64]),
        "orch_host_evict": (ctypes.c_int32, [host, text, ctypes.c_uint32, ctypes.c_uint64, out]),
        "orch_host_interrupt": (None, [host]),
        "orch_host_string_free": (None, [ctypes.c_void_p]),
        "orch_host_stop": (None, [host]),
    }
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib
