"""comfy.model_patcher as far as comfy-orch's surface check reads it (comfy_orch/comfyui/
_surface.py): the eviction API LoadedModel.model_unload calls on a model, with the signatures of
Comfy-Org/ComfyUI 02b2b3886164 (written here, no code copied). Nothing here loads a model."""


class ModelPatcher:
    def __init__(self, model, load_device, offload_device, size=0):
        self.model, self.load_device, self.offload_device = model, load_device, offload_device
        self.size = size

    def model_size(self):
        return self.size

    def loaded_size(self):
        return 0

    def partially_unload(self, device_to, memory_to_free=0, force_patch_weights=False):
        return 0

    def detach(self, unpatch_all=True):
        return self.model
