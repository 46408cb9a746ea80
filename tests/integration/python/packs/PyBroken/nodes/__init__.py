"""Test pack: its import fails, as a pack with a missing dependency does."""

import definitely_not_installed_module  # noqa: F401

NODE_CLASS_MAPPINGS = {}
