"""comfy.model_patcher as far as comfy-orch reads it: the eviction API LoadedModel.model_unload
calls on a model (the signatures of Comfy-Org/ComfyUI 02b2b3886164), and the full load of
a125cd84 (written here, no code copied): ModelPatcher.load moves every module that holds
weights of its own to the device, one by one, then (a full load) the whole model, and records
the model's size as the loaded weight memory."""

import uuid


def module_size(module):
    """comfy.model_management.module_size: the bytes of the module's state dict."""
    return sum(t.nelement() * t.element_size() for t in module.state_dict().values())


class ModelPatcher:
    def __init__(self, model, load_device, offload_device, size=0):
        self.model, self.load_device, self.offload_device = model, load_device, offload_device
        self.size = size
        self.loaded_weight_memory = 0
        self.clone_base_uuid = uuid.uuid4()

    def model_size(self):
        if self.size > 0 or self.model is None or not hasattr(self.model, "state_dict"):
            return self.size
        self.size = module_size(self.model)
        return self.size

    def loaded_size(self):
        return self.loaded_weight_memory

    def model_patches_models(self):
        return []

    def is_clone(self, other):
        return getattr(other, "clone_base_uuid", None) == self.clone_base_uuid

    def patch_model(self, device_to=None, lowvram_model_memory=0, load_weights=True,
                    force_patch_weights=False):
        if load_weights:
            self.load(device_to, lowvram_model_memory, force_patch_weights,
                      full_load=lowvram_model_memory == 0)
        return self.model

    def load(self, device_to=None, lowvram_model_memory=0, force_patch_weights=False,
             full_load=False):
        for _name, module in self.model.named_modules():
            if any(True for _ in module.parameters(recurse=False)):
                module.to(device_to)
        if full_load:
            self.model.to(device_to)
        self.loaded_weight_memory = self.model_size()

    def partially_unload(self, device_to, memory_to_free=0, force_patch_weights=False):
        return 0

    def detach(self, unpatch_all=True):
        self.loaded_weight_memory = 0
        return self.model
