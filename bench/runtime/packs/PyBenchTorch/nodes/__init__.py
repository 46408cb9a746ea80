"""bench_python's torch pack: one empty node; what it costs to start is torch's import."""

import torch  # noqa: F401


class TorchEmpty:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    RETURN_TYPES = ()
    FUNCTION = "run"
    OUTPUT_NODE = True

    def run(self):
        return ()


NODE_CLASS_MAPPINGS = {"TorchEmpty": TorchEmpty}
