import os


class DemoWhere:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "where"
    CATEGORY = "demo"
    OUTPUT_NODE = True

    def where(self):
        return (os.getpid(),)


NODE_CLASS_MAPPINGS = {"DemoWhere": DemoWhere}
