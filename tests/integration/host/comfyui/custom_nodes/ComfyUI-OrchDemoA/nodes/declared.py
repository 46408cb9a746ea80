"""Classes that declare everything ComfyUI's /object_info shows (server.py's node_info and a V3
class's GET_NODE_INFO_V1 at a125cd84): every widget option a frontend reads, hidden inputs of
every kind, RETURN_NAMES, OUTPUT_TOOLTIPS, OUTPUT_IS_LIST, DESCRIPTION, DEPRECATED, EXPERIMENTAL,
API_NODE, OUTPUT_NODE; and a class that declares none of the optional attributes, so ComfyUI's
defaults show. Their proxies and `serve` must show each of them exactly as ComfyUI would."""

from comfy_api.latest import io


class DemoDeclaresEverything:
    @classmethod
    def INPUT_TYPES(cls):
        return {
            "required": {
                "seed": ("INT", {"default": 0, "min": 0, "max": 0xffffffffffffffff, "step": 1,
                                 "control_after_generate": True, "tooltip": "the noise seed"}),
                "cfg": ("FLOAT", {"default": 8.0, "min": 0.0, "max": 100.0, "step": 0.1,
                                  "round": 0.01, "display": "slider"}),
                "text": ("STRING", {"multiline": True, "dynamicPrompts": True,
                                    "placeholder": "a prompt", "default": ""}),
                "flag": ("BOOLEAN", {"default": True, "label_on": "yes", "label_off": "no"}),
                "mode": (["fast", "slow"], {"default": "slow", "tooltip": "how"}),
                "choice": ("COMBO", {"options": ["x", "y"], "default": "x"}),
                "count": ("INT", {"forceInput": True}),
            },
            "optional": {
                "image": ("IMAGE", {"lazy": True, "tooltip": "an image, if any"}),
                "anything": ("*", {"rawLink": True}),
                "label": ("STRING", {"default": "none", "socketless": True}),
            },
            "hidden": {"unique_id": "UNIQUE_ID", "prompt": "PROMPT",
                       "extra_pnginfo": "EXTRA_PNGINFO", "dynprompt": "DYNPROMPT"},
        }

    RETURN_TYPES = ("INT", "STRING", "IMAGE")
    RETURN_NAMES = ("seed_out", "texts", "image_out")
    OUTPUT_TOOLTIPS = ("the seed", "one text per line", None)
    OUTPUT_IS_LIST = (False, True, False)
    FUNCTION = "run"
    CATEGORY = "demo/declared"
    DESCRIPTION = "Declares every field ComfyUI's /object_info shows."
    OUTPUT_NODE = True
    DEPRECATED = True
    EXPERIMENTAL = True
    API_NODE = False

    def check_lazy_status(self, **kwargs):
        return []

    def run(self, seed, cfg, text, flag, mode, choice, count, image=None, anything=None,
            label="none", unique_id=None, prompt=None, extra_pnginfo=None, dynprompt=None):
        return (seed, text.split("\n"), image)


class DemoDeclaresNothing:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("INT", {})}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "run"

    def run(self, value):
        return (value,)


class DemoDeclaredV3(io.ComfyNode):
    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="DemoDeclaredV3", display_name="Demo Declared (V3)", category="demo/declared",
            description="A V3 class: its GET_NODE_INFO_V1 is its /object_info entry.",
            is_output_node=True, is_experimental=True,
            inputs=[io.Int.Input("steps", default=20, min=1, max=100, step=1, tooltip="steps"),
                    io.Float.Input("denoise", default=1.0, min=0.0, max=1.0, step=0.01,
                                   optional=True),
                    io.String.Input("text", multiline=True, placeholder="text", default=""),
                    io.Boolean.Input("flag", default=False, label_on="on", label_off="off"),
                    io.Combo.Input("mode", options=["a", "b"], default="b"),
                    io.Int.Input("forced", force_input=True),
                    io.Image.Input("image", optional=True, lazy=True)],
            outputs=[io.Int.Output(display_name="steps_out", tooltip="the steps"),
                     io.String.Output(is_output_list=True)],
            hidden=[io.Hidden.unique_id])

    @classmethod
    def execute(cls, steps, text, flag, mode, forced, denoise=1.0, image=None):
        return io.NodeOutput(steps, [text])


NODE_CLASS_MAPPINGS = {"DemoDeclaresEverything": DemoDeclaresEverything,
                       "DemoDeclaresNothing": DemoDeclaresNothing,
                       "DemoDeclaredV3": DemoDeclaredV3}
NODE_DISPLAY_NAME_MAPPINGS = {"DemoDeclaresEverything": "Demo Declares Everything"}
