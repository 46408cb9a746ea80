"""comfy.options: main.py turns argument parsing on before comfy.cli_args is first imported; any
other importer (a worker, a test) gets the parser's defaults (ComfyUI a125cd84)."""

args_parsing = False


def enable_args_parsing(enable=True):
    global args_parsing
    args_parsing = enable
