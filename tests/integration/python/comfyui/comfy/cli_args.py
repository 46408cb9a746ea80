"""comfy.cli_args as comfy-orch reads it (docs/comfyui-fixture.md): `args`, ComfyUI's parsed
command line. As in ComfyUI a125cd84, sys.argv is parsed only when comfy.options enabled it
(main.py does), else every flag has its default: --cpu is off in any process that did not parse
it, a worker included. The flags are those comfy-orch mirrors into workers
(comfy_orch/_shared/comfyui_args.py) and the memory flags its host reads (of a newer ComfyUI)."""

import argparse
import enum

import comfy.options


class LatentPreviewMethod(enum.Enum):
    NoPreviews = "none"
    Auto = "auto"
    Latent2RGB = "latent2rgb"
    TAESD = "taesd"


class PerformanceFeature(enum.Enum):
    Fp16Accumulation = "fp16_accumulation"
    Fp8MatrixMultiplication = "fp8_matrix_mult"
    CublasOps = "cublas_ops"
    AutoTune = "autotune"


parser = argparse.ArgumentParser()
for flag in ("cpu", "gpu-only", "highvram", "normalvram", "lowvram", "novram",
             "disable-smart-memory", "disable-pinned-memory", "disable-async-offload",
             "disable-dynamic-vram", "enable-dynamic-vram", "force-fp32", "force-fp16",
             "fp16-vae", "bf16-vae", "fp32-vae", "cpu-vae", "deterministic", "disable-xformers",
             "use-pytorch-cross-attention", "force-channels-last", "disable-mmap"):
    parser.add_argument("--" + flag, action="store_true")
parser.add_argument("--async-offload", nargs="?", const=2, type=int, default=None)
parser.add_argument("--reserve-vram", type=float, default=None)
parser.add_argument("--vram-headroom", type=float, default=None)
parser.add_argument("--cuda-device", type=int, default=None)
parser.add_argument("--directml", type=int, nargs="?", const=-1, default=None)
parser.add_argument("--preview-method", type=LatentPreviewMethod,
                    default=LatentPreviewMethod.NoPreviews)
parser.add_argument("--fast", nargs="*", type=PerformanceFeature)
for directory in ("base", "input", "output", "temp", "user"):
    parser.add_argument("--%s-directory" % directory, type=str, default=None)

args = parser.parse_args() if comfy.options.args_parsing else parser.parse_args([])

if args.force_fp16:
    args.fp16_unet = True
if args.fast is None:
    args.fast = set()
elif args.fast == []:
    args.fast = set(PerformanceFeature)
else:
    args.fast = set(args.fast)
