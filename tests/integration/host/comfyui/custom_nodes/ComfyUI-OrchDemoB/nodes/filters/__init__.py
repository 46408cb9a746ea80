import os

import torch  # noqa: F401  (as a real tree's comfy_api imports it: this env's nodes get torch)


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


class DemoV3Sizes(io.ComfyNode):
    """A V3 class with V1's list flags as class attributes (as GeometryPack's mesh nodes have
    them): ComfyUI reads the attributes, so it gets every image at once."""

    INPUT_IS_LIST = True

    @classmethod
    def define_schema(cls):
        return io.Schema(node_id="DemoV3Sizes", category="demo/filters",
                         inputs=[io.Image.Input("images")],
                         outputs=[io.String.Output(display_name="sizes")], is_output_node=True)

    @classmethod
    def execute(cls, images):
        return io.NodeOutput(",".join(str(int(i.shape[2])) for i in images))


if hasattr(io, "DynamicCombo"):  # ComfyUI 0.8's dynamic inputs (not in a125cd84)
    class DemoV3Adjust(io.ComfyNode):
        """A DynamicCombo: each choice opens inputs of its own, and the node gets them nested
        under the combo's name, keys in the order the choice declares them."""

        @classmethod
        def define_schema(cls):
            return io.Schema(
                node_id="DemoV3Adjust", category="demo/filters",
                inputs=[io.Image.Input("image"),
                        io.DynamicCombo.Input("op", options=[
                            io.DynamicCombo.Option("scale", [
                                io.Float.Input("factor", default=2.0, min=0.0, max=4.0)]),
                            io.DynamicCombo.Option("offset", [
                                io.Float.Input("by", default=0.5), io.Image.Input("mask")])])],
                outputs=[io.Image.Output(display_name="image"),
                         io.String.Output(display_name="op")],
                hidden=[io.Hidden.unique_id], is_output_node=True)

        @classmethod
        def execute(cls, image, op):
            if op["op"] == "scale":
                out = image * op["factor"]
            else:
                out = image + op["by"] * op["mask"]
            said = "%s %s on node %s" % (list(op), op["op"], cls.hidden.unique_id)
            return io.NodeOutput(out, said, ui={"op": [said]})

    class DemoV3Sum(io.ComfyNode):
        """An Autogrow: as many FLOAT inputs as the prompt gives (x0, x1, ...)."""

        @classmethod
        def define_schema(cls):
            return io.Schema(
                node_id="DemoV3Sum", category="demo/filters",
                inputs=[io.Autogrow.Input("terms", template=io.Autogrow.TemplatePrefix(
                    io.Float.Input("x"), prefix="x", min=1, max=4))],
                outputs=[io.Float.Output(display_name="sum")], is_output_node=True)

        @classmethod
        def execute(cls, terms):
            return io.NodeOutput(float(sum(terms.values())))


class DemoKeys:
    """The keys of a dict another env made, in the order this node sees them."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("DEMO_POINTS",)}}

    RETURN_TYPES = ("STRING",)
    FUNCTION = "keys"
    CATEGORY = "demo/filters"
    OUTPUT_NODE = True

    def keys(self, value):
        return (",".join(value),)


class DemoMeshInfo:
    """Another env's mesh, as this env's worker has it."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"mesh": ("DEMO_MESH",)}}

    RETURN_TYPES = ("STRING",)
    FUNCTION = "info"
    CATEGORY = "demo/filters"
    OUTPUT_NODE = True

    def info(self, mesh):
        return ("%s of %d vertices, made in pid %d, read in pid %d"
                % (type(mesh).__name__, len(mesh.vertices), mesh.made_in, os.getpid()),)


class DemoBoxes:
    """A pack value holding a numpy array (Hunyuan3D-Part's BBOXES_3D) in an env whose nodes
    get torch tensors: it stays a numpy array everywhere, as in one process."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    RETURN_TYPES = ("DEMO_BOXES",)
    FUNCTION = "make"
    CATEGORY = "demo/filters"

    def make(self):
        import numpy
        return ({"bboxes": numpy.ones((2, 2, 3), numpy.float32), "num_parts": 2},)


class DemoBoxKinds:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"boxes": ("DEMO_BOXES",)}}

    RETURN_TYPES = ("STRING",)
    FUNCTION = "kinds"
    CATEGORY = "demo/filters"
    OUTPUT_NODE = True

    def kinds(self, boxes):
        return ("%s %s" % (type(boxes["bboxes"]).__name__, tuple(boxes["bboxes"].shape)),)


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
                       "DemoDescribeSize": DemoDescribeSize, "DemoV3Sizes": DemoV3Sizes,
                       "DemoKeys": DemoKeys, "DemoMeshInfo": DemoMeshInfo,
                       "DemoBoxes": DemoBoxes, "DemoBoxKinds": DemoBoxKinds}
if hasattr(io, "DynamicCombo"):
    NODE_CLASS_MAPPINGS.update(DemoV3Adjust=DemoV3Adjust, DemoV3Sum=DemoV3Sum)
