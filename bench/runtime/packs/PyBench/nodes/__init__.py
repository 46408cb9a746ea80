"""bench_python's numpy pack: an empty node, and a 64 MiB IMAGE made in the pool (written
through, or only its first and last elements as the native TestBlob does), passed through, and
made anew outside the pool (one copy into it)."""

import numpy as np

import comfy_orch

SHAPE = (1, 2048, 2048, 4)  # float32: 64 MiB
_outside = None


class PyEmpty:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    RETURN_TYPES = ()
    FUNCTION = "run"
    OUTPUT_NODE = True

    def run(self):
        return ()


class MakeBig:
    """The image's pool block with only its first and last elements set, as the native TestBlob
    does: what follows runs with the caches as a call finds them."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "run"

    def run(self):
        image = comfy_orch.empty(SHAPE, "float32")
        image.flat[0] = image.flat[-1] = 0.5
        return (image,)


class FillBig:
    """The image written through, as a real producer does: 64 MiB of writes push both processes
    out of the CPU's caches, so the call after it costs more whatever it does. An output node,
    so the empty node after it (node ids order outputs) is the floor for that case."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "run"
    OUTPUT_NODE = True

    def run(self):
        image = comfy_orch.empty(SHAPE, "float32")
        image.fill(0.5)
        return (image,)


class PassBig:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "run"
    OUTPUT_NODE = True

    def run(self, image):
        return (image,)


class TakeBig:
    """Takes the image and returns nothing: the input's cost alone."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)}}

    RETURN_TYPES = ()
    FUNCTION = "run"
    OUTPUT_NODE = True

    def run(self, image):
        return ()


class NewBig:
    """Returns an array that is not in the pool: the worker writes it there once."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "run"
    OUTPUT_NODE = True

    def run(self):
        global _outside
        if _outside is None:
            _outside = np.full(SHAPE, 0.25, dtype=np.float32)
        return (_outside,)


class BigUi:
    """An output node whose `ui` is `kib` KiB of text: what every WebSocket client is sent
    (bench_serve_attacks, S9)."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"kib": ("INT", {"default": 900, "min": 0, "max": 65536}),
                             "seed": ("INT", {"default": 0})}}

    RETURN_TYPES = ()
    FUNCTION = "run"
    OUTPUT_NODE = True

    def run(self, kib, seed):
        return {"ui": {"text": ["x" * (kib * 1024)]}}


NODE_CLASS_MAPPINGS = {
    c.__name__: c for c in (PyEmpty, MakeBig, FillBig, PassBig, TakeBig, NewBig, BigUi)}
