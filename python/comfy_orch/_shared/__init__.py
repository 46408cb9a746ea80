"""What more than one of comfy_orch's audiences uses, never imported by node code or ComfyUI:

- abi: the C ABIs' structs and numbers (the worker runtime, the host bindings);
- locate: where liborch_worker.so and liborch_host.so are;
- tensors: numpy and torch tensors over pool memory (a worker's values, the host's views);
- serializers: how values that are not plain cross between processes (both sides);
- import_hooks: code run when a module is first imported (the worker, the ComfyUI canary);
- comfyui_args: ComfyUI's arguments, written by ComfyUI's process and read by its workers."""
