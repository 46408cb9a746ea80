"""Test pack: a second Python env, using torch."""

import torch

import comfy_orch

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


class ReadLatent:
    """Reads a LATENT and a CONDITIONING made in another env: every tensor arrives as a torch
    view of the pool, every other item as itself."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"latent": ("LATENT",), "conditioning": ("CONDITIONING",)}}

    RETURN_TYPES = ("STRING", "LATENT")
    FUNCTION = "run"
    CATEGORY = "test/other"
    OUTPUT_NODE = True

    def run(self, latent, conditioning):
        cond, extra = conditioning[0]
        text = "samples %s sum %.1f, batch %r, note %s; cond %s, pooled sum %.1f, strength %.2f" % (
            type(latent["samples"]).__name__, float(latent["samples"].sum()),
            latent["batch_index"], latent["note"], tuple(cond.shape),
            float(extra["pooled_output"].sum()), extra["strength"])
        return (text, {"samples": latent["samples"] * 2})


class LoadTorchModel:
    """Builds a module and moves it to the worker's device, as a model loader does."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"width": ("INT", {"default": 256})}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "run"
    CATEGORY = "test/other"
    OUTPUT_NODE = True

    def run(self, width):
        model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.LayerNorm(width))
        model.to(comfy_orch.device())
        model.to(comfy_orch.device())  # registered once
        return (sum(p.numel() for p in model.parameters()),)


class LoadTorchModelInParts:
    """Moves each Linear of a model, then the whole model, as ComfyUI's ModelPatcher.load does:
    one model, recorded once at its size."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"width": ("INT", {"default": 256}), "layers": ("INT", {"default": 4})}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "run"
    CATEGORY = "test/other"
    OUTPUT_NODE = True

    def run(self, width, layers):
        model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])
        for layer in model:
            layer.to(comfy_orch.device())
        model.to(comfy_orch.device())
        return (sum(p.numel() for p in model.parameters()),)


class AllocatorName:
    """Which allocator torch uses in this worker."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    RETURN_TYPES = ("STRING",)
    FUNCTION = "run"
    CATEGORY = "test/other"
    OUTPUT_NODE = True

    def run(self):
        if not torch.cuda.is_available():
            return ("no cuda",)
        x = torch.empty(1 << 20, device="cuda")
        return ("%s %d" % (torch.cuda.memory.get_allocator_backend(), x.numel()),)


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


NODE_CLASS_MAPPINGS = {"TorchDescribe": TorchDescribe, "UseOtherThing": UseOtherThing,
                       "ReadLatent": ReadLatent, "LoadTorchModel": LoadTorchModel,
                       "AllocatorName": AllocatorName,
                       "LoadTorchModelInParts": LoadTorchModelInParts}
