"""Test pack: ComfyUI's list mapping, the class methods the host forwards (VALIDATE_INPUTS,
IS_CHANGED), and the hidden values DYNPROMPT and EXTRA_PNGINFO. It imports neither numpy nor
torch, as many packs do not."""

import json
import sys

import comfy_orch


class Fanout:
    """One list output: its consumers are called once per item."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"count": ("INT", {"default": 3, "min": 0, "max": 100})}}

    RETURN_TYPES = ("INT", "STRING")
    OUTPUT_IS_LIST = (True, False)
    FUNCTION = "run"
    CATEGORY = "test/lists"

    def run(self, count):
        return (list(range(1, count + 1)), "fanout of %d" % count)


class Scale:
    """An ordinary node: mapped over its longest input list, a shorter one repeating its last."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("INT", {"forceInput": True}),
                             "factor": ("INT", {"default": 10})}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "run"
    CATEGORY = "test/lists"

    def run(self, value, factor):
        return (value * factor,)


class Join:
    """INPUT_IS_LIST: called once with every input as its whole list."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"values": ("INT", {"forceInput": True}),
                             "separator": ("STRING", {"default": ","})},
                "hidden": {"unique_id": "UNIQUE_ID"}}

    INPUT_IS_LIST = True
    RETURN_TYPES = ("STRING",)
    FUNCTION = "run"
    CATEGORY = "test/lists"
    OUTPUT_NODE = True

    def run(self, values, separator, unique_id):
        assert isinstance(separator, list) and isinstance(unique_id, list), (separator, unique_id)
        return (separator[0].join(str(v) for v in values),)


class NotAList:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    RETURN_TYPES = ("INT",)
    OUTPUT_IS_LIST = (True,)
    FUNCTION = "run"
    CATEGORY = "test/lists"

    def run(self):
        return (7,)


class Picky:
    """VALIDATE_INPUTS takes `name` (so the combo's own check is skipped: a pack that lists files
    at run time) and refuses `count` 13; IS_CHANGED keys on `name` only."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"name": (["a.png", "b.png"],),
                             "count": ("INT", {"default": 1, "min": 0, "max": 20})}}

    RETURN_TYPES = ("STRING",)
    FUNCTION = "run"
    CATEGORY = "test/lists"
    OUTPUT_NODE = True

    @classmethod
    def VALIDATE_INPUTS(cls, name, count):
        if count == 13:
            return "count 13 is unlucky"
        if not name.endswith(".png"):
            return "%s is not a png" % name
        return True

    @classmethod
    def IS_CHANGED(cls, name, count):
        return "key:" + name

    def run(self, name, count):
        return ("%s x%d" % (name, count),)


class TypeChecker:
    """VALIDATE_INPUTS with input_types: it checks its link's type itself."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"anything": ("FLOAT", {"forceInput": True})}}

    RETURN_TYPES = ("STRING",)
    FUNCTION = "run"
    CATEGORY = "test/lists"
    OUTPUT_NODE = True

    @classmethod
    def VALIDATE_INPUTS(cls, input_types):
        if input_types.get("anything") not in ("FLOAT", "INT"):
            return "anything must be a number, got %s" % input_types.get("anything")
        return True

    def run(self, anything):
        return ("%r" % anything,)


class Checked:
    """VALIDATE_INPUTS as packs write it: a linked input is None there (not its default), a hidden
    value it names is passed, no interrupt of any prompt applies, and it cannot allocate."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"path": ("STRING", {"default": "", "forceInput": True}),
                             "allocate": ("BOOLEAN", {"default": False})},
                "hidden": {"unique_id": "UNIQUE_ID"}}

    RETURN_TYPES = ("STRING",)
    FUNCTION = "run"
    CATEGORY = "test/lists"
    OUTPUT_NODE = True

    @classmethod
    def VALIDATE_INPUTS(cls, path, allocate, unique_id):
        if comfy_orch.interrupted():
            return "interrupted during validation"
        if allocate:
            comfy_orch.empty((4,), "float32")
        if path is not None and not path:
            return "node %s: path is empty" % unique_id
        return True

    @classmethod
    def IS_CHANGED(cls, path, allocate, unique_id):
        return float("nan")  # ComfyUI's "always changed"

    def run(self, path, allocate, unique_id):
        return (path,)


class Fickle:
    """IS_CHANGED that raises: ComfyUI reads it as always changed."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "run"
    CATEGORY = "test/lists"
    OUTPUT_NODE = True

    @classmethod
    def IS_CHANGED(cls):
        raise RuntimeError("cannot tell")

    def run(self):
        return (1,)


class Hidden:
    """DYNPROMPT and EXTRA_PNGINFO."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {},
                "hidden": {"dynprompt": "DYNPROMPT", "pnginfo": "EXTRA_PNGINFO",
                           "unique_id": "UNIQUE_ID"}}

    RETURN_TYPES = ("STRING", "STRING")
    FUNCTION = "run"
    CATEGORY = "test/lists"
    OUTPUT_NODE = True

    def run(self, dynprompt, pnginfo, unique_id):
        own = dynprompt.get_node(unique_id)
        return ("%s %s" % (own["class_type"], sorted(dynprompt.all_node_ids())),
                json.dumps(pnginfo, sort_keys=True))


class Shown:
    """An output node with ComfyUI's UI dict and no result: called once per item of a list, so
    the host merges the calls' UIs per key."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("INT", {"forceInput": True})}}

    RETURN_TYPES = ()
    FUNCTION = "run"
    CATEGORY = "test/lists"
    OUTPUT_NODE = True

    def run(self, value):
        return {"ui": {"text": ["value %d" % value],
                       "images": [{"filename": "v%d.png" % value, "subfolder": "",
                                   "type": "output"}]}}


class Imported:
    """Which of numpy and torch this worker has imported."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    RETURN_TYPES = ("STRING",)
    FUNCTION = "run"
    CATEGORY = "test/lists"
    OUTPUT_NODE = True

    def run(self):
        return (" ".join("%s=%s" % (m, m in sys.modules) for m in ("numpy", "torch")),)


NODE_CLASS_MAPPINGS = {c.__name__: c for c in (Fanout, Scale, Join, NotAList, Picky, TypeChecker,
                                               Checked, Fickle, Hidden, Shown, Imported)}
