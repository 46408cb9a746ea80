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


NODE_CLASS_MAPPINGS = {"DemoInvert": DemoInvert, "DemoBatchSizes": DemoBatchSizes,
                       "DemoLoadLut": DemoLoadLut}
