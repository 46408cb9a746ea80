"""ComfyUI's utils.install_util, which server.py imports (through app.frontend_management)."""

from pathlib import Path

requirements_path = Path(__file__).parents[1] / "requirements.txt"
