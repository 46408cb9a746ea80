"""Nodes a person sees in the frontend's node library: a combo, an INT with min, max and step,
named outputs, and a preview node that saves a PNG into ComfyUI's temp directory and returns it
as ComfyUI's PreviewImage does ({"ui": {"images": [...]}}), so the page shows it from /view."""

import os
import struct
import zlib

import numpy as np

import folder_paths


def _png(rgb):
    """An 8-bit RGB PNG of an [H, W, 3] uint8 array (zlib only: no imaging library)."""
    height, width, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(height))

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw))
            + chunk(b"IEND", b""))


class BrowserTint:
    """Tints an image by a colour chosen in a combo, `amount` steps of 5 out of 100."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "image": ("IMAGE",),
            "colour": (["red", "green", "blue"], {"default": "green"}),
            "amount": ("INT", {"default": 50, "min": 0, "max": 100, "step": 5}),
        }}

    RETURN_TYPES = ("IMAGE", "INT")
    RETURN_NAMES = ("tinted", "amount_used")
    FUNCTION = "tint"
    CATEGORY = "browser demo"

    def tint(self, image, colour, amount):
        out = np.array(image, dtype=np.float32, copy=True)
        channel = ["red", "green", "blue"].index(colour)
        out[..., channel] = np.clip(out[..., channel] + amount / 100.0, 0.0, 1.0)
        return (out, amount)


class BrowserPreview:
    """ComfyUI's PreviewImage: each image of the batch as a PNG in the temp directory."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"images": ("IMAGE",)}}

    RETURN_TYPES = ()
    FUNCTION = "preview"
    OUTPUT_NODE = True
    CATEGORY = "browser demo"

    def preview(self, images):
        directory = folder_paths.get_temp_directory()
        os.makedirs(directory, exist_ok=True)
        saved = []
        for index, image in enumerate(np.asarray(images)):
            name = "browser_preview_%05d_.png" % index
            rgb = (np.clip(image[..., :3], 0.0, 1.0) * 255).astype(np.uint8)
            with open(os.path.join(directory, name), "wb") as f:
                f.write(_png(np.ascontiguousarray(rgb)))
            saved.append({"filename": name, "subfolder": "", "type": "temp"})
        return {"ui": {"images": saved}}


NODE_CLASS_MAPPINGS = {"BrowserTint": BrowserTint, "BrowserPreview": BrowserPreview}
NODE_DISPLAY_NAME_MAPPINGS = {"BrowserTint": "Browser Tint", "BrowserPreview": "Browser Preview"}
