import os


class DemoInvert:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)}}

    RETURN_TYPES = ("IMAGE", "INT")
    RETURN_NAMES = ("image", "pid")
    FUNCTION = "invert"
    CATEGORY = "demo/filters"

    def invert(self, image):
        return (1.0 - image, os.getpid())


class DemoBatchSizes:
    """ComfyUI's list flags: takes every image of a list at once, returns one size per image."""

    INPUT_IS_LIST = True
    OUTPUT_IS_LIST = (True,)

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"images": ("IMAGE",)}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "sizes"
    CATEGORY = "demo/filters"

    def sizes(self, images):
        return ([int(i.shape[2]) for i in images],)


class DemoLoadLut:
    """A lookup table of `size_mib` the worker's memory manager keeps resident."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"size_mib": ("INT", {"default": 8, "min": 2, "max": 64})}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "load"
    CATEGORY = "demo/filters"
    OUTPUT_NODE = True

    def load(self, size_mib):
        import comfy_orch
        lut = comfy_orch.register_model("lut", size_mib << 20)
        lut.fault(0, size_mib << 20)
        lut.unpin(0, size_mib << 20)
        return (os.getpid(),)


from comfy_api.latest import io  # noqa: E402  (the worker has ComfyUI's tree on its path)


class DemoV3Gain(io.ComfyNode):
    """A V3 node: typed inputs, a pack type of its own, hidden values from cls.hidden, and its
    own validate_inputs and fingerprint_inputs."""

    @classmethod
    def define_schema(cls):
        return io.Schema(
            node_id="DemoV3Gain", display_name="Demo Gain (V3)", category="demo/filters",
            inputs=[io.Image.Input("image"),
                    io.Float.Input("gain", default=2.0, min=0.0, max=8.0, step=0.5),
                    io.Combo.Input("mode", options=["mul", "add"]),
                    io.Custom("DEMO_TAG").Input("tag", optional=True)],
            outputs=[io.Image.Output(display_name="image"), io.String.Output(display_name="who")],
            hidden=[io.Hidden.unique_id], is_output_node=True)

    @classmethod
    def validate_inputs(cls, gain, mode):
        return True if gain != 3.0 else "a gain of 3 is not allowed"

    @classmethod
    def fingerprint_inputs(cls, gain, mode, **others):  # ComfyUI passes every input
        return "%s:%s" % (mode, gain)

    @classmethod
    def execute(cls, image, gain, mode, tag=None):
        out = image * gain if mode == "mul" else image + gain
        return io.NodeOutput(out, "node %s, pid %d" % (cls.hidden.unique_id, os.getpid()),
                             ui={"gain": [gain]})


class DemoDescribeSize:
    """What another env's node gave it: the types as this process sees them."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"size": ("DEMO_SIZE",)}}

    RETURN_TYPES = ("STRING",)
    FUNCTION = "describe"
    CATEGORY = "demo/filters"
    OUTPUT_NODE = True

    def describe(self, size):
        return ("%s of %s, %s" % (type(size).__name__, size[:2], type(size[2]).__name__),)


NODE_CLASS_MAPPINGS = {"DemoInvert": DemoInvert, "DemoBatchSizes": DemoBatchSizes,
                       "DemoLoadLut": DemoLoadLut, "DemoV3Gain": DemoV3Gain,
                       "DemoDescribeSize": DemoDescribeSize}
