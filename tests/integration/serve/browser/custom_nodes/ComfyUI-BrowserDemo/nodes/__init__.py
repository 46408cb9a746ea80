"""Nodes a person sees in the frontend's node library: a combo, an INT with min, max and step,
named outputs; a node that talks to the page while it runs (progress text, a live preview, a
message for the pack's JavaScript); and a preview node that saves a PNG into ComfyUI's temp
directory and returns it as ComfyUI's PreviewImage does ({"ui": {"images": [...]}}), so the page
shows it from /view. The pack's own HTTP route is in web_routes.py."""

import os
import time

import numpy as np

import folder_paths

from . import web_routes  # noqa: F401  (registers the pack's aiohttp route at import)
from .png import png


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


class BrowserSteps:
    """Works in `steps` steps as a sampler does and tells the page at each, as sampler and viewer
    packs do: its progress text, a progress bar with a preview of the image so far, and a
    `browserdemo.status` message, with the image's mean colour, for the pack's JavaScript. Each
    step waits `step_ms` so that a person (and the test) sees the node at work."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {
            "image": ("IMAGE",),
            "steps": ("INT", {"default": 4, "min": 1, "max": 50}),
            "step_ms": ("INT", {"default": 250, "min": 0, "max": 5000}),
        }, "hidden": {"unique_id": "UNIQUE_ID"}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "run"
    CATEGORY = "browser demo"

    def run(self, image, steps, step_ms, unique_id):
        import comfy.utils
        from PIL import Image  # ComfyUI's preview tuple holds a PIL image
        from server import PromptServer
        server = PromptServer.instance
        rgb = (np.clip(np.asarray(image, dtype=np.float32)[0, ..., :3], 0.0, 1.0) * 255
               ).astype(np.uint8)
        colour = "%02x%02x%02x" % tuple(int(round(c)) for c in rgb.reshape(-1, 3).mean(axis=0))
        bar = comfy.utils.ProgressBar(steps, node_id=unique_id)
        for step in range(1, steps + 1):
            time.sleep(step_ms / 1000.0)
            shown = rgb.copy()
            shown[rgb.shape[0] * step // steps:] = 0  # revealed row by row, as a sampler's
            server.send_progress_text("step %d of %d" % (step, steps), unique_id,
                                      server.client_id)
            server.send_sync("browserdemo.status", {"node": unique_id, "step": step,
                                                    "steps": steps, "colour": colour},
                             server.client_id)
            bar.update_absolute(step, steps, ("JPEG", Image.fromarray(shown), 256))
        return (image,)


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
                f.write(png(np.ascontiguousarray(rgb)))
            saved.append({"filename": name, "subfolder": "", "type": "temp"})
        return {"ui": {"images": saved}}


NODE_CLASS_MAPPINGS = {"BrowserTint": BrowserTint, "BrowserSteps": BrowserSteps,
                       "BrowserPreview": BrowserPreview}
NODE_DISPLAY_NAME_MAPPINGS = {"BrowserTint": "Browser Tint", "BrowserSteps": "Browser Steps",
                              "BrowserPreview": "Browser Preview"}
