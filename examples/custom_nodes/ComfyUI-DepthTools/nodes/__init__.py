"""ComfyUI-DepthTools: a Python pack written as for ComfyUI (V1 classes), run by comfy-orch in
its own env's worker. Its nodes use numpy only, so they receive numpy arrays (docs/python.md)."""

import numpy as np


class DepthFromLuminance:
    """A pseudo depth map: brighter is nearer. IMAGE [B,H,W,C] float32 in, IMAGE out."""

    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "image": ("IMAGE",),
                "mode": (["near_is_bright", "near_is_dark"], {"default": "near_is_bright"}),
                "gamma": ("FLOAT", {"default": 1.0, "min": 0.1, "max": 10.0, "step": 0.1}),
            },
            "hidden": {"unique_id": "UNIQUE_ID"},
        }

    RETURN_TYPES = ("IMAGE",)
    RETURN_NAMES = ("depth",)
    FUNCTION = "estimate"
    CATEGORY = "depth"

    def estimate(self, image, mode, gamma, unique_id=None):
        luminance = image[..., :3] @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
        depth = np.clip(luminance, 0.0, 1.0) ** np.float32(gamma)
        if mode == "near_is_dark":
            depth = 1.0 - depth
        print("node %s: depth range %.3f..%.3f" % (unique_id, depth.min(), depth.max()))
        return (np.repeat(depth[..., None], 3, axis=-1).astype(np.float32),)


NODE_CLASS_MAPPINGS = {"DepthFromLuminance": DepthFromLuminance}
NODE_DISPLAY_NAME_MAPPINGS = {"DepthFromLuminance": "Depth From Luminance"}
