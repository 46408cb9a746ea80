"""bench_nodes for the cold start with torch: the same functions, in a module that imports torch
first, as a pack of ComfyUI nodes does."""

import torch  # noqa: F401  (imported for its cost)

from bench_nodes import add_one, echo, empty, node_classes  # noqa: F401
