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


NODE_CLASS_MAPPINGS = {"DemoMean": DemoMean}
