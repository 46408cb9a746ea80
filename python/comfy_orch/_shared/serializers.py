"""How values that are not plain cross between a worker and ComfyUI's process (docs/python.md,
docs/comfyui.md): the marks both sides read, and pack-registered serializers (comfy-env's
register_serializer), by which a pack's own type crosses as a JSON-safe payload instead of
staying in its worker as a handle. Both sides register the same names (the pack's module runs in
each process that uses the type); a side without a deserializer for a tag keeps the payload as
the marked dict, so it can still be passed on unchanged."""

from __future__ import annotations

import threading

TYPE_CHECKING = False  # typing is not imported at run time: a worker's start pays for it
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeAlias

    # A pack's objects and their payloads are whatever the pack makes of them.
    Recurse: TypeAlias = Callable[[Any], Any]
    Serialize: TypeAlias = Callable[[Any, Recurse], Any]
    Deserialize: TypeAlias = Callable[[Any, Recurse], Any]
    Entry: TypeAlias = tuple[Serialize, "Deserialize | None", str]

MARK = "__comfy_orch_serialized__"
# A tuple crosses as {TUPLE: [items]}: the values between processes have lists, not tuples, and
# a node that returned a tuple (a size, a pair) is given a tuple on the other side too.
TUPLE = "__comfy_orch_tuple__"
# A numpy array crosses as {NDARRAY: tensor} where the other side would make a torch tensor of
# it (ComfyUI's process; a worker whose pack imported torch), so that node code gets a numpy
# array back, as in one process (Hunyuan3D-Part's BBOXES_3D holds one).
NDARRAY = "__comfy_orch_ndarray__"
# An object that stays in its worker crosses as this prefix, then env:pid:n:type (a STRING).
HANDLE_PREFIX = "comfy_orch.handle:"
# An object handed to another env as its pickle: {PICKLE: type name, "env": where it was made,
# "data": the pickle as a uint8 tensor}; only the receiving worker unpickles it.
PICKLE = "__comfy_orch_pickle__"
# The internal class of each Python worker that hands one of its objects to another env:
# EXPORT_PREFIX + its env (worker/_crossing.py; the executor's executor_handover.cpp).
EXPORT_PREFIX = "orch.export:"


def pickle_max_bytes() -> int:
    """The largest pickle that crosses: ORCH_PICKLE_MAX_BYTES, else 1 GiB."""
    import os
    try:
        return int(os.environ.get("ORCH_PICKLE_MAX_BYTES", "") or 1 << 30)
    except ValueError:
        return 1 << 30


class PickleTooLarge(ValueError):
    """A pickle passed pickle_max_bytes() while it was written."""


def capped_pickle(value: object) -> bytes:
    """`value`'s pickle, refused (PickleTooLarge) as soon as it passes pickle_max_bytes(): a
    large object is never held whole in memory only to be refused. Whatever the object's own
    pickling raises is raised."""
    import pickle
    cap = pickle_max_bytes()

    class Sink:
        def __init__(self) -> None:
            self.data = bytearray()

        def write(self, chunk: bytes) -> int:
            if len(self.data) + len(chunk) > cap:
                raise PickleTooLarge("its pickle is over ORCH_PICKLE_MAX_BYTES (%d bytes)" % cap)
            self.data += chunk
            return len(chunk)

    sink = Sink()
    pickle.Pickler(sink, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return bytes(sink.data)

_lock = threading.Lock()
_by_type: dict[str, Entry] = {}  # class name -> (serialize, deserialize, tag)
_by_tag: dict[str, Entry] = {}


def register(type_name: str, serialize: Serialize, deserialize: Deserialize | None = None,
             tag: str | None = None) -> None:
    if not isinstance(type_name, str) or not type_name:
        raise TypeError("register_serializer: type_name is the class's __name__ (a non-empty "
                        "str), not %r" % (type_name,))
    if not callable(serialize) or (deserialize is not None and not callable(deserialize)):
        raise TypeError("register_serializer(%r): serialize (and deserialize, when given) must "
                        "be callables" % type_name)
    entry = (serialize, deserialize, str(tag or type_name))
    with _lock:
        _by_type[type_name] = entry
        _by_tag[entry[2]] = entry


def _entry_for(obj: object) -> Entry | None:
    if not _by_type:
        return None
    for klass in type(obj).__mro__:
        entry = _by_type.get(klass.__name__)
        if entry is not None:
            return entry
    return None


def encode(obj: object) -> dict[str, Any] | None:
    """`obj` as the marked payload dict when its type has a serializer; else None."""
    entry = _entry_for(obj)
    if entry is None:
        return None
    return {MARK: entry[2], "payload": entry[0](obj, encode_nested)}


def encode_nested(value: Any) -> Any:
    """The `recurse` handed to a serializer: registered objects inside a payload."""
    marked = encode(value)
    if marked is not None:
        return marked
    if isinstance(value, (list, tuple)):
        return [encode_nested(v) for v in value]
    if isinstance(value, dict):
        return {k: encode_nested(v) for k, v in value.items()}
    return value


def decode(value: Any) -> Any:
    """A marked payload dict rebuilt with its tag's deserializer, a marked tuple as a tuple;
    anything else as it is."""
    if isinstance(value, dict) and len(value) == 1 and isinstance(value.get(TUPLE), list):
        return tuple(decode_nested(v) for v in value[TUPLE])
    if isinstance(value, dict) and len(value) == 1 and NDARRAY in value:
        array = value[NDARRAY]
        as_numpy = getattr(array, "numpy", None)  # a torch view over the same bytes
        return as_numpy() if callable(as_numpy) else array
    if not isinstance(value, dict) or MARK not in value:
        return value
    tag = value.get(MARK)
    entry = _by_tag.get(tag) if isinstance(tag, str) else None
    if entry is None or entry[1] is None:
        return value
    return entry[1](value.get("payload"), decode_nested)


def decode_nested(value: Any) -> Any:
    if isinstance(value, dict):
        if MARK in value or TUPLE in value or NDARRAY in value:
            return decode(value)
        return {k: decode_nested(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode_nested(v) for v in value]
    return value
