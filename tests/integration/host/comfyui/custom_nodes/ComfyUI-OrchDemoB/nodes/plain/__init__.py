import os


class DemoMean:
    """No manifest: runs in ComfyUI's own process."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)}}

    RETURN_TYPES = ("FLOAT", "INT")
    FUNCTION = "mean"
    CATEGORY = "demo"
    OUTPUT_NODE = True

    def mean(self, image):
        return (float(image.mean()), os.getpid())


class DemoPlainMesh:
    """A pack object made in ComfyUI's own process (a pack without isolation, as a GeometryPack
    without comfy-env): a worker's node gets it pickled across."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    RETURN_TYPES = ("DEMO_MESH",)
    FUNCTION = "make"
    CATEGORY = "demo"

    def make(self):
        import types
        return (types.SimpleNamespace(vertices=[[0, 0, 0], [0, 0, 1]], made_in=os.getpid()),)


NODE_CLASS_MAPPINGS = {"DemoMean": DemoMean, "DemoPlainMesh": DemoPlainMesh}
