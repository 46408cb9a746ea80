"""comfy_api.internal: the bases every V3 API version's classes derive from. ComfyUI's executor
tells a V3 node from a V1 one by issubclass(class_def, _ComfyNodeInternal) and a V3 result by
isinstance(result, _NodeOutputInternal), never by the absence of V1 attributes: a real
io.ComfyNode has INPUT_TYPES and FUNCTION too (docs/comfyui-fixture.md)."""


class _ComfyNodeInternal:
    """The base of every version's ComfyNode (latest, v0_0_2, ...)."""


class _NodeOutputInternal:
    """The base of every version's NodeOutput."""


def prune_dict(d):
    """d without its None values (what the V3 inputs' as_dict leave out)."""
    return {k: v for k, v in d.items() if v is not None}


def is_class(obj):
    return isinstance(obj, type)


def first_real_override(cls, name, *, base=None):
    """cls's own `name` where a class below `base` (cls.GET_BASE_CLASS()) defines it, else None:
    the base's placeholder (raising NotImplementedError) does not count."""
    if base is None:
        base = cls.GET_BASE_CLASS()
    placeholder = getattr(base, name, None)
    if placeholder is None:
        return None
    for klass in cls.mro():
        if klass is base:
            break
        if name in klass.__dict__ and getattr(klass, name).__func__ is not placeholder.__func__:
            return getattr(cls, name)
    return None
