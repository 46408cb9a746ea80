"""The C structs and constants of the node ABI (worker/include/orch/worker/nodes.h), the worker API
(worker.h), the plugin ABI's status (plugin.h) and the host API's status codes
(orchestrator/host_api/include/orch/host/host.h), as ctypes sees them. Field order and types
follow the headers exactly; every struct starts with struct_size and only grows at its end
(docs/nodes.md). Every constant here is checked against its header's by
tests/unit/source/check_abi_constants.py: NAME is ORCH_NAME there (STATUS_NAME is ORCH_NAME).

Shared by the worker runtime (the node ABI) and the host bindings (the host's status codes, the
dtypes). Each struct declares its fields' Python types for the type checker, as typeshed does for
ctypes: what reading the field gives (a c_char_p field reads as bytes or None, a c_void_p one as
an int or None) and what may be stored in it (an array where the C field is a pointer)."""

from __future__ import annotations

import ctypes as C
from collections.abc import Callable

import _ctypes  # loaded with ctypes: its CFuncPtr is what a CFUNCTYPE instance is

NODES_ABI_MAJOR = 1

NODE_OK = 0
NODE_ERROR = 1
NODE_INTERRUPTED = 2

VALUE_NONE = 0
VALUE_INT = 1
VALUE_FLOAT = 2
VALUE_BOOL = 3
VALUE_STRING = 4
VALUE_TENSOR = 5
VALUE_LIST = 6
VALUE_DICT = 7
MAX_VALUE_DEPTH = 5  # containers within containers (worker/src/node_values.cpp)

DTYPE_F32 = 1
DTYPE_U8 = 2
DTYPE_I64 = 3

TENSOR_MAX_DIMS = 8

INPUT_REQUIRED = 1
INPUT_HAS_MIN = 2
INPUT_HAS_MAX = 4
INPUT_HAS_DEFAULT = 8
INPUT_REST = 16  # every input the call names that no other input declares, as one dict

NODE_OUTPUT_NODE = 1
NODE_NOT_IDEMPOTENT = 2

LOG_DEBUG = 1
LOG_INFO = 2
LOG_WARN = 3
LOG_ERROR = 4

# orch_status (plugins/include/orch/plugin/plugin.h)
STATUS_OK = 0
STATUS_OOM_RETRYABLE = 1

# The host API's status codes (orchestrator/host_api/include/orch/host/host.h)
HOST_OK = 0
HOST_INVALID = 1
HOST_FAILED = 2
HOST_INTERRUPTED = 3  # not now: the node stopped for an interrupt
HOST_RETRYABLE = 4    # not now: its worker was lost or is not ready; the next call may run


class Buffer(C.Structure):
    _fields_ = [("segment", C.c_uint32), ("generation", C.c_uint32),
                ("offset", C.c_uint64), ("size", C.c_uint64)]
    segment: int
    generation: int
    offset: int
    size: int


class Tensor(C.Structure):
    _fields_ = [("dtype", C.c_uint32), ("ndim", C.c_uint32),
                ("shape", C.c_int64 * TENSOR_MAX_DIMS), ("strides", C.c_int64 * TENSOR_MAX_DIMS),
                ("data", C.c_void_p), ("buffer", Buffer)]
    dtype: int
    ndim: int
    shape: C.Array[C.c_int64]
    strides: C.Array[C.c_int64]
    data: int | None
    buffer: Buffer


class Value(C.Structure):
    _fields_ = [("kind", C.c_uint32), ("reserved0", C.c_uint32), ("i", C.c_int64),
                ("f", C.c_double), ("s", C.c_char_p), ("tensor", Tensor)]
    kind: int
    reserved0: int
    i: int
    f: float
    s: bytes | None
    tensor: Tensor


class ValueItem(C.Structure):
    """An item of a LIST (key None) or DICT value; the items travel in tensor.data."""
    _fields_ = [("key", C.c_char_p), ("value", Value)]
    key: bytes | None
    value: Value


class NodeInput(C.Structure):
    _fields_ = [("name", C.c_char_p), ("type", C.c_char_p), ("flags", C.c_uint32),
                ("struct_size", C.c_uint32), ("min", C.c_double), ("max", C.c_double),
                ("default_value", Value)]
    name: bytes | None
    type: bytes | None
    flags: int
    struct_size: int
    min: float
    max: float
    default_value: Value


class NodeContext(C.Structure):
    api: C._Pointer[NodeApi]  # _fields_ below, once NodeApi exists
    impl: int | None


ExecuteFn = C.CFUNCTYPE(C.c_int32, C.POINTER(NodeContext), C.POINTER(Value), C.POINTER(Value))


class NodeClass(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("flags", C.c_uint32), ("class_type", C.c_char_p),
                ("display_name", C.c_char_p), ("category", C.c_char_p),
                ("inputs", C.POINTER(NodeInput)), ("input_count", C.c_uint32),
                ("output_count", C.c_uint32), ("outputs", C.POINTER(C.c_char_p)),
                ("execute", ExecuteFn), ("schema_json", C.c_char_p),
                ("validate_inputs", ExecuteFn), ("is_changed", ExecuteFn)]
    struct_size: int
    flags: int
    class_type: bytes | None
    display_name: bytes | None
    category: bytes | None
    inputs: C._Pointer[NodeInput] | C.Array[NodeInput]
    input_count: int
    output_count: int
    outputs: C._Pointer[C.c_char_p] | C.Array[C.c_char_p]
    execute: _ctypes.CFuncPtr  # an ExecuteFn
    schema_json: bytes | None
    validate_inputs: _ctypes.CFuncPtr
    is_changed: _ctypes.CFuncPtr


class NodeSet(C.Structure):
    _fields_ = [("struct_size", C.c_uint32), ("abi_major", C.c_uint32),
                ("classes", C.POINTER(NodeClass)), ("count", C.c_uint32),
                ("reserved0", C.c_uint32)]
    struct_size: int
    abi_major: int
    classes: C._Pointer[NodeClass] | C.Array[NodeClass]
    count: int
    reserved0: int


_ctx = C.POINTER(NodeContext)


class NodeApi(C.Structure):
    """orch_node_api. Its functions' pointer arguments (out-parameters, arrays) are whatever
    ctypes accepts for them (byref(), an array), hence `object`."""
    _fields_ = [
        ("struct_size", C.c_uint32), ("reserved0", C.c_uint32),
        ("output_tensor", C.CFUNCTYPE(C.c_int32, _ctx, C.c_uint32, C.c_uint32,
                                      C.POINTER(C.c_int64), C.POINTER(Tensor))),
        ("region", C.CFUNCTYPE(C.c_int32, _ctx, C.c_char_p, C.c_uint64,
                               C.POINTER(C.c_void_p), C.POINTER(C.c_int32))),
        ("region_fault", C.CFUNCTYPE(C.c_int32, _ctx, C.c_void_p, C.c_uint64, C.c_uint64)),
        ("region_unpin", C.CFUNCTYPE(C.c_int32, _ctx, C.c_void_p, C.c_uint64, C.c_uint64)),
        ("cast_buffer", C.CFUNCTYPE(C.c_int32, _ctx, C.c_uint32, C.c_uint64,
                                    C.POINTER(C.c_uint64))),
        ("pinned_reserve", C.CFUNCTYPE(C.c_int32, _ctx, C.c_uint64)),
        ("pinned_release", C.CFUNCTYPE(None, _ctx, C.c_uint64)),
        ("progress", C.CFUNCTYPE(None, _ctx, C.c_uint64, C.c_uint64)),
        ("interrupted", C.CFUNCTYPE(C.c_int32, _ctx)),
        ("log", C.CFUNCTYPE(None, _ctx, C.c_int32, C.c_char_p)),
        ("fail", C.CFUNCTYPE(None, _ctx, C.c_char_p, C.c_char_p)),
        ("node_id", C.CFUNCTYPE(C.c_char_p, _ctx)),
        ("streams", C.CFUNCTYPE(C.c_uint32, _ctx)),
        ("fail_traceback", C.CFUNCTYPE(None, _ctx, C.POINTER(C.c_char_p), C.c_uint32)),
        ("hidden", C.CFUNCTYPE(C.c_char_p, _ctx, C.c_char_p)),
        ("ui", C.CFUNCTYPE(C.c_int32, _ctx, C.c_char_p)),  # ABI 1.3
        ("expand", C.CFUNCTYPE(C.c_int32, _ctx, C.c_char_p)),  # ABI 1.4
    ]
    struct_size: int
    reserved0: int
    output_tensor: Callable[[C._Pointer[NodeContext], int, int, object, object], int]
    region: Callable[[C._Pointer[NodeContext], bytes, int, object, object], int]
    region_fault: Callable[[C._Pointer[NodeContext], object, int, int], int]
    region_unpin: Callable[[C._Pointer[NodeContext], object, int, int], int]
    cast_buffer: Callable[[C._Pointer[NodeContext], int, int, object], int]
    pinned_reserve: Callable[[C._Pointer[NodeContext], int], int]
    pinned_release: Callable[[C._Pointer[NodeContext], int], None]
    progress: Callable[[C._Pointer[NodeContext], int, int], None]
    interrupted: Callable[[C._Pointer[NodeContext]], int]
    log: Callable[[C._Pointer[NodeContext], int, bytes], None]
    fail: Callable[[C._Pointer[NodeContext], bytes, bytes], None]
    node_id: Callable[[C._Pointer[NodeContext]], bytes | None]
    streams: Callable[[C._Pointer[NodeContext]], int]
    fail_traceback: Callable[[C._Pointer[NodeContext], object, int], None]
    hidden: Callable[[C._Pointer[NodeContext], bytes], bytes | None]
    ui: Callable[[C._Pointer[NodeContext], bytes], int]
    expand: Callable[[C._Pointer[NodeContext], bytes], int]


NodeContext._fields_ = [("api", C.POINTER(NodeApi)), ("impl", C.c_void_p)]


def api_has(api: NodeApi, field: str) -> bool:
    """Whether the worker's orch_node_api holds `field` (appended fields): its table is long
    enough, and the entry is set."""
    member = getattr(NodeApi, field)  # ctypes' field descriptor: its offset and size
    return api.struct_size >= member.offset + member.size and bool(getattr(api, field))
