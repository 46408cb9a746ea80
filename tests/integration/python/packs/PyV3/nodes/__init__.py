"""Test pack: V3 nodes (io.ComfyNode), one from NODE_CLASS_MAPPINGS and one from the
comfy_entrypoint() extension, using ComfyUI's ProgressBar and interrupt check unchanged."""

import time

import numpy as np

import comfy.model_management
import comfy.utils
from comfy_api.latest import ComfyExtension, io


class Scale(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="V3Scale",
            display_name="Scale (V3)",
            category="test/v3",
            inputs=[io.Image.Input("image"),
                    io.Float.Input("factor", default=2.0, min=0.0, max=8.0),
                    io.Combo.Input("mode", options=["mul", "add"]),
                    io.String.Input("note", optional=True, multiline=True)],
            outputs=[io.Image.Output(display_name="scaled"), io.String.Output(display_name="who")],
            hidden=[io.Hidden.unique_id],
            is_output_node=True)

    @classmethod
    def execute(cls, image, factor, mode, note=None):
        out = image * np.float32(factor) if mode == "mul" else image + np.float32(factor)
        return io.NodeOutput(out, "%s/%s" % (cls.hidden.unique_id, note))


class Steps(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(node_id="V3Steps", category="test/v3",
                         inputs=[io.Int.Input("steps", default=5, min=1, max=100000)],
                         outputs=[io.Int.Output()], is_output_node=True)

    @classmethod
    def validate_inputs(cls, steps):
        return True if steps != 13 else "13 steps are not allowed"

    @classmethod
    def fingerprint_inputs(cls, steps):
        return "steps:%d" % steps

    @classmethod
    def execute(cls, steps):
        bar = comfy.utils.ProgressBar(steps)
        for _ in range(steps):
            time.sleep(0.01)
            comfy.model_management.throw_exception_if_processing_interrupted()
            bar.update(1)
        return io.NodeOutput(steps)


class LegacyProgress:
    """A V1 node that reports through ComfyUI's ProgressBar, as most packs do."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"steps": ("INT", {"default": 3})}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "run"
    CATEGORY = "test/v3"
    OUTPUT_NODE = True

    def run(self, steps):
        bar = comfy.utils.ProgressBar(steps)
        for _ in range(steps):
            bar.update(1)
        return (steps,)


class Extension(ComfyExtension):
    async def get_node_list(self):
        return [Steps]


async def comfy_entrypoint():
    return Extension()


NODE_CLASS_MAPPINGS = {"V3Scale": Scale, "LegacyProgress": LegacyProgress}
