"""ComfyUI's nodes module as far as importing it goes (ComfyUI a125cd84): at import it puts its
comfy/ directory first on sys.path (so `import utils` resolves to comfy/utils.py from then on,
unless ComfyUI's own utils package was imported before, as main.py does), and imports
comfy.model_management."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "comfy"))

import comfy.model_management  # noqa: E402,F401
