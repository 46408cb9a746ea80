import bpy_not_installed  # noqa: F401  (only its env would have it)


class DemoBoolean:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    RETURN_TYPES = ()
    FUNCTION = "run"


NODE_CLASS_MAPPINGS = {"DemoBoolean": DemoBoolean}
