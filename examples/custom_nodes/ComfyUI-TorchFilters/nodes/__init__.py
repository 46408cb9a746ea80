"""ComfyUI-TorchFilters: a Python pack whose nodes use torch, as most packs do. It imports torch,
so comfy-orch hands it torch tensors: views of the pinned pool, never copies (docs/python.md)."""

import torch
import torch.nn.functional as F


class BoxBlur:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",),
                             "radius": ("INT", {"default": 2, "min": 0, "max": 64})}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "blur"
    CATEGORY = "image/filters"

    def blur(self, image, radius):
        if radius == 0:
            return (image,)  # passed through: the same pool buffer goes on, no copy
        size = 2 * radius + 1
        x = image.permute(0, 3, 1, 2)  # [B,C,H,W]
        kernel = torch.full((x.shape[1], 1, size, size), 1.0 / (size * size))
        x = F.conv2d(F.pad(x, (radius,) * 4, mode="replicate"), kernel, groups=x.shape[1])
        return (x.permute(0, 2, 3, 1).contiguous(),)


NODE_CLASS_MAPPINGS = {"BoxBlur": BoxBlur}
NODE_DISPLAY_NAME_MAPPINGS = {"BoxBlur": "Box Blur"}
