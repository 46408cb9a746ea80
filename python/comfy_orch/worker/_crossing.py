"""Objects that cross envs as comfy-env lets them (docs/comfyui.md, "Objects across envs").

An object a node returns that is neither a tensor nor a plain value stays in its worker as a
handle, and a node of the same env gets it back as it is. When a node of another env takes it,
comfy-orch asks the owning worker for it through the internal class "orch.export:<env>":

1. a serializer the pack registered for its type (comfy_env.register_serializer): its payload;
2. else a pickle of it, at most ORCH_PICKLE_MAX_BYTES (1 GiB), which crosses as a uint8 tensor
   in the pinned pool; comfy-orch's own processes never unpickle it (it is opaque there, as the
   pickle comfy-env forwards where its host cannot unpickle), and the receiving worker does;
3. where the receiving env cannot import the type, or the object cannot be pickled, the node
   fails naming both envs, the type and the fix."""

from __future__ import annotations

from .._shared import serializers
from . import _schema

TYPE_CHECKING = False  # typing is not imported at run time: a worker's start pays for it
if TYPE_CHECKING:
    from typing import Any

MARK = serializers.PICKLE
_FIX = ("register a serializer for it in both envs (comfy_env.register_serializer), or run "
        "both nodes in one env")


def _type_name(obj: object) -> str:
    return "%s.%s" % (type(obj).__module__, type(obj).__qualname__)


def export(obj: object, env: str) -> Any:
    """What crosses for `obj`: its registered serializer's payload, else its pickle."""
    marked = serializers.encode(obj)
    if marked is not None:
        return marked
    try:
        data = serializers.capped_pickle(obj)
    except serializers.PickleTooLarge as exc:
        raise ValueError("a %s of env '%s' cannot cross to another env: %s; %s"
                         % (_type_name(obj), env, exc, _FIX)) from None
    except Exception as exc:  # noqa: BLE001 - whatever the object's __reduce__ raises
        raise TypeError("a %s of env '%s' cannot cross to another env: it cannot be pickled "
                        "(%s: %s); %s" % (_type_name(obj), env, type(exc).__name__, exc,
                                          _FIX)) from None
    import numpy
    return {MARK: _type_name(obj), "env": env,
            "data": numpy.frombuffer(data, dtype=numpy.uint8)}


def is_crossing(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get(MARK), str)


def load(value: dict[str, Any], env: str, node: str) -> Any:
    """The object a crossing carries, unpickled in this env."""
    import pickle
    data: Any = value.get("data")
    try:
        raw = data.numpy().tobytes() if hasattr(data, "numpy") else bytes(memoryview(data))
    except TypeError:
        raise TypeError("%s: a crossing object without its pickle" % node) from None
    try:
        return pickle.loads(raw)
    except (ImportError, AttributeError) as exc:
        raise TypeError("%s: a %s made in env '%s' cannot be used in env '%s': this env cannot "
                        "import its type (%s: %s); add the package that defines it to env "
                        "'%s''s dependencies, or %s"
                        % (node, value[MARK], value.get("env", "?"), env, type(exc).__name__,
                           exc, env, _FIX)) from None


class ExportSpec(_schema.NodeSpec):
    """The internal class "orch.export:<env>": one input, the object (by its handle), one
    output, what crosses for it (export)."""

    def __init__(self, env: str) -> None:
        def run(self: object, value: object) -> tuple[Any]:
            return (export(value, env),)

        cls = type("Export", (), {
            "INPUT_TYPES": classmethod(lambda c: {"required": {"value": ("*",)}}),
            "RETURN_TYPES": ("*",), "FUNCTION": "run", "NOT_IDEMPOTENT": True, "CATEGORY": "",
            "run": run})
        super().__init__(serializers.EXPORT_PREFIX + env, cls, None)

    def schema(self) -> dict[str, Any]:
        return dict(super().schema(), orch_internal=True)
