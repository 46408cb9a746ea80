"""Test pack: an env without numpy. Its nodes that pass text run; a tensor sent to it cannot be
made into an array there."""

import importlib.util


class BareEcho:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"text": ("STRING", {"default": ""})}}

    RETURN_TYPES = ("STRING",)
    FUNCTION = "run"
    CATEGORY = "test/bare"
    OUTPUT_NODE = True

    def run(self, text):
        return ("%s, numpy importable: %s" % (text, importlib.util.find_spec("numpy") is not None),)


class BareShape:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)}}

    RETURN_TYPES = ("STRING",)
    FUNCTION = "run"
    CATEGORY = "test/bare"
    OUTPUT_NODE = True

    def run(self, image):
        return (str(tuple(image.shape)),)


NODE_CLASS_MAPPINGS = {"BareEcho": BareEcho, "BareShape": BareShape}
