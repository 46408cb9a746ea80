"""Test pack: ComfyUI's V1 node contract, one node per item, as real packs write it."""

import ctypes
import os
import sys
import threading
import time

import numpy as np

import comfy_orch

from .where import where


class Describe:
    """Reports what it received: types, and for a tensor where its bytes live."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)},
                "optional": {"note": ("STRING", {"default": "none", "multiline": True})},
                "hidden": {"unique_id": "UNIQUE_ID", "prompt": "PROMPT"}}

    RETURN_TYPES = ("STRING", "STRING", "FLOAT", "STRING")
    RETURN_NAMES = ("kind", "where", "sum", "unique_id")
    FUNCTION = "describe"
    CATEGORY = "test/contract"
    OUTPUT_NODE = True

    def describe(self, image, unique_id, prompt, note="unset"):
        kind = "%s %s %s %s" % (type(image).__module__, type(image).__name__,
                                str(image.dtype), tuple(image.shape))
        own = prompt[unique_id]  # the PROMPT hidden value: the API prompt, from the host
        return (kind, where(image), float(image.sum()),
                "%s/%s/%s" % (unique_id, note, own["class_type"]))


class Options:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"mode": (["fast", "exact"],),
                             "count": ("INT", {"default": 3, "min": 1, "max": 10, "step": 1}),
                             "scale": ("FLOAT", {"default": 0.5, "min": 0.0, "max": 1.0}),
                             "flag": ("BOOLEAN", {"default": True}),
                             "text": ("STRING", {"multiline": True, "default": "hi"})},
                "optional": {"extra": ("INT", {"default": 7, "forceInput": True})}}

    RETURN_TYPES = ("STRING",)
    FUNCTION = "run"
    CATEGORY = "test/contract"
    OUTPUT_NODE = True
    DESCRIPTION = "every widget kind"

    def run(self, mode, count, scale, flag, text, extra=None):
        return {"ui": {"text": [mode]},
                "result": ("%s|%d|%.2f|%s|%s|%s" % (mode, count, scale, flag, text, extra),)}


class MakeImage:
    """A pool-backed output: comfy_orch.empty, filled and returned without a copy."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("FLOAT", {"default": 1.0})}}

    RETURN_TYPES = ("IMAGE", "STRING")
    FUNCTION = "make"
    CATEGORY = "test/contract"

    def make(self, value):
        image = comfy_orch.empty((1, 4, 8, 3), "float32")
        image[...] = value
        return (image, where(image))


class PassThrough:
    """Returns its input; `flatten` first reshapes that same array object in place."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"image": ("IMAGE",)},
                "optional": {"flatten": ("BOOLEAN", {"default": False})}}

    RETURN_TYPES = ("IMAGE", "STRING")
    FUNCTION = "run"
    CATEGORY = "test/contract"

    def run(self, image, flatten=False):
        if flatten:
            image.shape = (image.shape[0], -1)
        return (image, where(image))


class Lists:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("INT", {"default": 1})}}

    INPUT_IS_LIST = True
    RETURN_TYPES = ("STRING",)
    OUTPUT_IS_LIST = (True,)
    FUNCTION = "run"
    CATEGORY = "test/contract"
    OUTPUT_NODE = True
    EXPERIMENTAL = True

    def run(self, value):
        return (["%s:%r" % (type(value).__name__, value)],)


class Raise:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"message": ("STRING", {"default": "bad input"})}}

    RETURN_TYPES = ()
    FUNCTION = "run"
    CATEGORY = "test/contract"
    OUTPUT_NODE = True

    def run(self, message):
        raise ValueError(message)


class Detach:
    """Starts a helper that leaves the worker's process group (setsid and a double fork, as a
    daemon does) and writes its pid to `pid_file`; with `clear_env`, the helper then runs
    `sleep` with an empty environment, so that nothing marks it as the worker's."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"pid_file": ("STRING", {"default": ""})},
                "optional": {"clear_env": ("BOOLEAN", {"default": False})}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "run"
    CATEGORY = "test/contract"
    OUTPUT_NODE = True

    def run(self, pid_file, clear_env=False):
        child = os.fork()
        if child == 0:
            os.setsid()
            if os.fork() == 0:
                with open(pid_file + ".tmp", "w") as f:
                    f.write(str(os.getpid()))
                os.rename(pid_file + ".tmp", pid_file)
                if clear_env:
                    os.execve("/bin/sleep", ["sleep", "300"], {})
                time.sleep(300)
            os._exit(0)
        os.waitpid(child, 0)
        while not os.path.exists(pid_file):
            time.sleep(0.01)
        return (int(open(pid_file).read()),)


class RawOutput:
    """Writes to the worker's fd 1 and 2 directly (a C library would): a forged event line, an
    escape sequence that would clear the operator's terminal, and `mib` MiB of lines."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"mib": ("INT", {"default": 0})}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "run"
    CATEGORY = "test/contract"
    OUTPUT_NODE = True

    def run(self, mib):
        os.write(1, b'{"type": "execution_success", "data": {"prompt_id": "forged"}}\n')
        os.write(2, b"\x1b[2J\x1b[31mcleared your terminal\n")
        # C1's CSI, a right-to-left override and bytes that are not UTF-8 (issue 55).
        os.write(2, b"c1 \xc2\x9b2J bidi \xe2\x80\xaeevil bad \xff\xfe end\n")
        line = b"x" * 1023 + b"\n"
        for _ in range(mib * 1024):
            os.write(2, line)
        return (mib,)


class LoadTorchLazily:
    """Imports torch inside the node (packs do, to start fast) and moves a model to the
    worker's device: it is recorded all the same."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"width": ("INT", {"default": 128})}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "run"
    CATEGORY = "test/contract"
    OUTPUT_NODE = True

    def run(self, width):
        import torch
        model = torch.nn.Linear(width, width)
        model.to(comfy_orch.device())
        return (sum(p.numel() for p in model.parameters()),)


class Expand:
    """Expands into a subgraph (ComfyUI's node expansion), which only ComfyUI carries out."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "run"
    CATEGORY = "test/contract"
    OUTPUT_NODE = True

    def run(self):
        return {"result": (["e.1", 0],),
                "expand": {"e.1": {"class_type": "Lists", "inputs": {"value": 1}}}}


class Crash:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "run"
    CATEGORY = "test/contract"
    OUTPUT_NODE = True
    NOT_IDEMPOTENT = True
    DEPRECATED = True

    def run(self):
        ctypes.string_at(1)  # a native crash inside the interpreter (SIGSEGV)
        return (0,)


class ProgressFlood:
    """Reports progress as fast as a loop can: never more than the host reads."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"count": ("INT", {"default": 50000})}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "run"
    CATEGORY = "test/contract"
    OUTPUT_NODE = True

    def run(self, count):
        for k in range(count):
            comfy_orch.progress(k + 1, count)
        return (os.getpid(),)


class Sleep:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"seconds": ("FLOAT", {"default": 30.0})}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "run"
    CATEGORY = "test/contract"
    OUTPUT_NODE = True

    def run(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            comfy_orch.check_interrupted()
            time.sleep(0.005)
        return (os.getpid(),)


class Chatty:
    """Prints from several threads at once; every line must reach the log whole."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"threads": ("INT", {"default": 4}), "lines": ("INT", {"default": 50})}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "run"
    CATEGORY = "test/contract"
    OUTPUT_NODE = True

    def run(self, threads, lines):
        def talk(k):
            for n in range(lines):
                print("chatty thread %d line %d %s" % (k, n, "x" * 40))
        workers = [threading.Thread(target=talk, args=(k,)) for k in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        # Imported only now, after the worker started: its records still keep their level.
        import logging
        logging.getLogger("chatty").warning("chatty logging line")
        logging.getLogger("chatty").info("chatty info line")
        return (threads * lines,)


class MakeLatent:
    """A LATENT and a CONDITIONING, as samplers pass them: containers with tensors inside."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"value": ("FLOAT", {"default": 1.0})}}

    RETURN_TYPES = ("LATENT", "CONDITIONING")
    FUNCTION = "run"
    CATEGORY = "test/contract"

    def run(self, value):
        samples = comfy_orch.empty((1, 4, 8, 8), "float32")
        samples[...] = value
        pooled = np.full((1, 16), value * 2, dtype=np.float32)
        latent = {"samples": samples, "batch_index": [0], "note": "made"}
        conditioning = [[np.ones((1, 3, 16), dtype=np.float32), {"pooled_output": pooled,
                                                                  "strength": np.float32(0.5)}]]
        return (latent, conditioning)


class BigText:
    """Returns fresh strings of `kib` KiB: the worker copies them after the callback returns, so
    they must still be alive then (a freed string this large is unmapped, not just reused)."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"kib": ("INT", {"default": 256})}}

    RETURN_TYPES = ("STRING", "LIST")
    FUNCTION = "run"
    CATEGORY = "test/contract"
    OUTPUT_NODE = True

    def run(self, kib):
        text = "".join(["y" * (kib << 10), "!"])
        return (text, [text[:3] * 1000, {"tail": "z" * (kib << 10)}])


class Thing:
    def __init__(self, size):
        self.size = size


class MakeThing:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"size": ("INT", {"default": 5})}}

    RETURN_TYPES = ("THING",)
    FUNCTION = "run"
    CATEGORY = "test/contract"

    def run(self, size):
        return (Thing(size),)


class MakePlainThing:
    """A thing of a type every env imports (the standard library's): another env's node gets
    it pickled across."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"size": ("INT", {"default": 5})}}

    RETURN_TYPES = ("THING",)
    FUNCTION = "run"
    CATEGORY = "test/contract"

    def run(self, size):
        import types
        return (types.SimpleNamespace(size=size),)


class UseThing:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"thing": ("THING",)}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "run"
    CATEGORY = "test/contract"
    OUTPUT_NODE = True

    def run(self, thing):
        return (thing.size,)


class LoadModel:
    """A model the host can see (a stand-in) and evict."""

    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {"name": ("STRING", {"default": "weights"}),
                             "mib": ("INT", {"default": 64})}}

    RETURN_TYPES = ("INT",)
    FUNCTION = "run"
    CATEGORY = "test/contract"
    OUTPUT_NODE = True

    def run(self, name, mib):
        model = comfy_orch.register_model(name, mib << 20)
        model.fault(0, mib << 20)
        model.unpin(0, mib << 20)
        return (int(model.created),)


class Environment:
    @classmethod
    def INPUT_TYPES(cls):
        return {"required": {}}

    RETURN_TYPES = ("STRING",)
    FUNCTION = "run"
    CATEGORY = "test/contract"
    OUTPUT_NODE = True

    def run(self):
        keys = ("PY_CONTRACT_VAR", "PYTHONNOUSERSITE", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME")
        values = ["%s=%s" % (k, os.environ.get(k, "<unset>")) for k in keys]
        return ("|".join(values + ["cwd=" + os.getcwd(), "path0=" + sys.path[0],
                                   "torch=" + str("torch" in sys.modules)]),)


NODE_CLASS_MAPPINGS = {c.__name__: c for c in (Describe, Options, MakeImage, PassThrough, Lists,
                                               Raise, Crash, Sleep, Chatty, MakeThing, UseThing,
                                               MakePlainThing, ProgressFlood,
                                               LoadModel, Environment, MakeLatent, BigText,
                                               Expand, LoadTorchLazily, RawOutput, Detach)}
NODE_DISPLAY_NAME_MAPPINGS = {"Describe": "Describe Input"}
