"""Demo pack A: an image source, a filter, a model object that stays in its worker, and a viewer
node that returns a ui. It imports ComfyUI's server module at the top, as viewer packs do to
register routes: that imports comfy.model_management, so its worker needs ComfyUI's --cpu, and it
reads PromptServer.instance, which a worker must have."""

import os
import sys

import numpy as np

import server  # noqa: F401  (ComfyUI's; imports comfy.model_management)
from server import PromptServer

from . import routes  # noqa: F401  (its ROUTES are served by ComfyUI, answered here)
from . import web_routes  # noqa: F401  (aiohttp routes, served from this worker)

# A route, registered at import as viewer packs do: PromptServer.instance is read unguarded
# (ComfyUI builds its server before packs load; its class has no `instance` until then).
if PromptServer.instance is not None:
    @PromptServer.instance.routes.get("/orchdemo/ping")
    async def _ping(request):
        from aiohttp import web
        return web.json_response({"pong": True})


class DemoGradient:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"width": ("INT", {"default": 8, "min": 1, "max": 4096}),
                             "height": ("INT", {"default": 4, "min": 1, "max": 4096})}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "make"
    CATEGORY = "demo"

    def make(self, width, height):
        row = np.linspace(0.0, 1.0, width, dtype=np.float32)
        image = np.ascontiguousarray(np.broadcast_to(row[None, None, :, None],
                                                     (1, height, width, 3)))
        # An IMAGE is a torch tensor where the pack has torch (a real tree's comfy imports it),
        # as ComfyUI's nodes expect; a numpy array only where node code gets numpy arrays.
        torch = sys.modules.get("torch")
        return (torch.from_numpy(image) if torch is not None else image,)


class DemoLoadModel:
    """A model: an object of the pack's own that never leaves its worker."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"gain": ("FLOAT", {"default": 2.0})}}

    RETURN_TYPES = ("DEMO_MODEL",)
    FUNCTION = "load"
    CATEGORY = "demo"

    def load(self, gain):
        return (DemoModel(gain),)


class DemoModel:
    def __init__(self, gain):
        self.gain = gain
        self.pid = os.getpid()


class DemoApplyModel:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"model": ("DEMO_MODEL",), "image": ("IMAGE",)}}

    RETURN_TYPES = ("IMAGE", "STRING")
    RETURN_NAMES = ("image", "where")
    FUNCTION = "apply"
    CATEGORY = "demo"

    def apply(self, model, image):
        return (image * model.gain, "%s in pid %d" % (os.environ.get("DEMO_A_GREETING"),
                                                       model.pid))


class DemoLoadWeights:
    """Weights the worker's memory manager holds on its device, as a checkpoint loader's would:
    registered under `name`, brought in whole, then unpinned (evictable)."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"name": ("STRING", {"default": "weights"}),
                             "size_mib": ("INT", {"default": 16, "min": 2, "max": 256})}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "load"
    CATEGORY = "demo"
    OUTPUT_NODE = True

    def load(self, name, size_mib):
        import comfy_orch
        size = size_mib << 20
        weights = comfy_orch.register_model(name, size)
        weights.fault(0, size)
        weights.unpin(0, size)
        return (size,)


class DemoLoadComfyModel:
    """A model loaded the way packs load them: a torch module in a ComfyUI ModelPatcher, loaded
    with comfy.model_management.load_models_gpu (which moves each layer, then the whole model).
    torch is imported inside the node, as packs do to start fast."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"layers": ("INT", {"default": 4})}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "load"
    CATEGORY = "demo"
    OUTPUT_NODE = True
    loaded = []  # the worker keeps its models, as a loader's cache does

    def load(self, layers):
        import torch

        import comfy.model_management as mm
        import comfy.model_patcher
        model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024, bias=False)
                                      for _ in range(layers)])
        patcher = comfy.model_patcher.ModelPatcher(model, load_device=mm.get_torch_device(),
                                                   offload_device=torch.device("cpu"))
        mm.load_models_gpu([patcher])
        self.loaded.append(patcher)
        return (patcher.loaded_size(),)


class DemoSleep:
    """Works in steps as a sampler does: ComfyUI's progress bar, and its interrupt check."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"steps": ("INT", {"default": 10})}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "run"
    CATEGORY = "demo"
    OUTPUT_NODE = True

    def run(self, steps):
        import time

        import comfy.model_management
        import comfy.utils
        bar = comfy.utils.ProgressBar(steps)
        for _ in range(steps):
            comfy.model_management.throw_exception_if_processing_interrupted()
            time.sleep(0.02)
            bar.update(1)
        return (steps,)


class DemoTalker:
    """Talks to the page while it runs, as viewer and sampler packs do: a message for the client
    whose prompt runs, its progress text, and a progress bar with a preview image."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"text": ("STRING", {"default": "hi"})},
                "hidden": {"unique_id": "UNIQUE_ID"}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "run"
    CATEGORY = "demo"
    OUTPUT_NODE = True

    def run(self, text, unique_id):
        import comfy.utils
        from PIL import Image
        server = PromptServer.instance
        server.send_sync("orchdemo.talk", {"text": text, "client": server.client_id},
                         server.client_id)
        server.send_progress_text("talking: " + text, unique_id, server.client_id)
        bar = comfy.utils.ProgressBar(2, node_id=unique_id)
        bar.update_absolute(1, 2, ("JPEG", Image.new("RGB", (64, 32), (200, 10, 10)), 16))
        bar.update_absolute(2, 2)
        return (len(text),)


class DemoViewer:
    """A viewer: an output node whose {"ui": ...} is what ComfyUI's executed message carries,
    with a result beside it and a tuple inside its ui."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "view"
    CATEGORY = "demo"
    OUTPUT_NODE = True

    def view(self, image):
        import comfy.model_management
        return {"ui": {"text": ["%dx%d" % (image.shape[2], image.shape[1])],
                       "cpu": [bool(comfy.model_management.args.cpu)]},
                "result": (int(image.shape[2]),)}


class DemoSize:
    """An output that is a tuple inside: ComfyUI's next node gets a tuple, as in one process."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)}}

    RETURN_TYPES = ("DEMO_SIZE",)
    FUNCTION = "size"
    CATEGORY = "demo"

    def size(self, image):
        return ((int(image.shape[2]), int(image.shape[1]), ("w", "h")),)


class DemoPoints:
    """A dict whose keys are not in sorted order (SAM3's point prompts): every process sees the
    order the node gave."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    RETURN_TYPES = ("DEMO_POINTS",)
    FUNCTION = "points"
    CATEGORY = "demo"

    def points(self):
        return ({"points": [[1, 2]], "labels": [1]},)


class DemoMesh:
    """A pack object of a type both envs can import (as GeometryPack's Trimesh): another env's
    node gets it as it is, pickled across."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    RETURN_TYPES = ("DEMO_MESH",)
    FUNCTION = "make"
    CATEGORY = "demo"

    def make(self):
        import types
        return (types.SimpleNamespace(vertices=[[0, 0, 0], [1, 0, 0], [0, 1, 0]],
                                      made_in=os.getpid()),)


class DemoFail:
    """Fails in its worker: ComfyUI's traceback must reach this file and line."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"why": ("STRING", {"default": "on purpose"})}}

    RETURN_TYPES = ()
    FUNCTION = "fail"
    CATEGORY = "demo"
    OUTPUT_NODE = True

    def fail(self, why):
        raise ValueError("DemoFail failed " + why)


class DemoInvertedGradient:
    """Expands into a subgraph, as ComfyUI's node expansion does: a gradient from this env and
    an inversion from env B, which ComfyUI runs in this node's place."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"width": ("INT", {"default": 8})},
                "hidden": {"unique_id": "UNIQUE_ID"}}

    RETURN_TYPES = ("IMAGE",)
    FUNCTION = "expand"
    CATEGORY = "demo"

    def expand(self, width, unique_id):
        gradient, invert = "%s.gradient" % unique_id, "%s.invert" % unique_id
        graph = {gradient: {"class_type": "DemoGradient",
                            "inputs": {"width": width, "height": 2}},
                 invert: {"class_type": "DemoInvert", "inputs": {"image": [gradient, 0]}}}
        return {"result": ([invert, 0],), "expand": graph}


from . import declared  # noqa: E402

NODE_CLASS_MAPPINGS = {"DemoViewer": DemoViewer, "DemoGradient": DemoGradient, "DemoLoadModel": DemoLoadModel,
                       "DemoApplyModel": DemoApplyModel, "DemoSleep": DemoSleep,
                       "DemoLoadWeights": DemoLoadWeights, "DemoSize": DemoSize,
                       "DemoInvertedGradient": DemoInvertedGradient,
                       "DemoLoadComfyModel": DemoLoadComfyModel, "DemoPoints": DemoPoints,
                       "DemoFail": DemoFail, "DemoMesh": DemoMesh, "DemoTalker": DemoTalker}
NODE_DISPLAY_NAME_MAPPINGS = {"DemoGradient": "Demo Gradient", "DemoLoadModel": "Demo Load Model",
                              "DemoApplyModel": "Demo Apply Model"}
NODE_CLASS_MAPPINGS.update(declared.NODE_CLASS_MAPPINGS)
NODE_DISPLAY_NAME_MAPPINGS.update(declared.NODE_DISPLAY_NAME_MAPPINGS)
