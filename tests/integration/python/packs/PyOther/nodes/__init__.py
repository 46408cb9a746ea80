"""Test pack: a second Python env, using torch."""

import torch

from .where import where


class TorchDescribe:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)}}

    RETURN_TYPES = ("IMAGE", "STRING", "STRING")
    FUNCTION = "run"
    CATEGORY = "test/other"

    def run(self, image):
        kind = "%s %s %s" % (type(image).__name__, image.dtype, tuple(image.shape))
        return (image * 2.0, kind, where(image))


class UseOtherThing:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"thing": ("THING",)}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "run"
    CATEGORY = "test/other"
    OUTPUT_NODE = True

    def run(self, thing):
        return (thing.size,)


NODE_CLASS_MAPPINGS = {"TorchDescribe": TorchDescribe, "UseOtherThing": UseOtherThing}
