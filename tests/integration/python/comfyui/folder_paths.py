"""ComfyUI's folder_paths as comfy-orch touches it (ComfyUI a125cd84): the input, output, temp
and user directories under the tree, each movable with its set_*_directory (what
--input-directory and the like call). Importing it imports comfy.cli_args, which parses argv
then if main.py enabled that."""

import os

from comfy.cli_args import args  # noqa: F401

base_path = os.path.dirname(os.path.realpath(__file__))
_directories = {kind: os.path.join(base_path, kind) for kind in ("input", "output", "temp", "user")}


def get_input_directory():
    return _directories["input"]


def get_output_directory():
    return _directories["output"]


def get_temp_directory():
    return _directories["temp"]


def get_user_directory():
    return _directories["user"]


def set_input_directory(path):
    _directories["input"] = path


def set_output_directory(path):
    _directories["output"] = path


def set_temp_directory(path):
    _directories["temp"] = path


def set_user_directory(path):
    _directories["user"] = path
