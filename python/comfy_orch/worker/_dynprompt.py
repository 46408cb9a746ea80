"""ComfyUI's DYNPROMPT hidden value in a worker (docs/python.md). ComfyUI passes its
comfy_execution.graph.DynamicPrompt: the prompt as it runs, ephemeral nodes included. The worker
builds one from the PROMPT the host sent: ComfyUI's own class where the worker can import it (the
deployment names a ComfyUI root), else this read-only stand-in with the same read methods. The
host expands no subgraphs, so there are no ephemeral nodes to add or look up."""

from __future__ import annotations

TYPE_CHECKING = False  # typing is not imported at run time: a worker's start pays for it
if TYPE_CHECKING:
    from typing import Any, NoReturn

    # The API prompt as JSON gave it: node id -> {"class_type", "inputs", ...}.
    Prompt = dict[str, Any]


class NodeNotFoundError(Exception):
    pass


class DynamicPrompt:
    def __init__(self, original_prompt: Prompt | None) -> None:
        self.original_prompt: Prompt = original_prompt or {}

    def get_node(self, node_id: str) -> Any:
        if node_id not in self.original_prompt:
            raise NodeNotFoundError("Node %s not found" % node_id)
        return self.original_prompt[node_id]

    def has_node(self, node_id: str) -> bool:
        return node_id in self.original_prompt

    def add_ephemeral_node(self, node_id: str, node_info: object, parent_id: str,
                           display_id: str) -> NoReturn:
        raise NotImplementedError("comfy-orch does not expand subgraphs inside a worker")

    def get_real_node_id(self, node_id: str) -> str:
        return node_id

    def get_parent_node_id(self, node_id: str) -> str | None:
        return None

    def get_display_node_id(self, node_id: str) -> str:
        return node_id

    def all_node_ids(self) -> set[str]:
        return set(self.original_prompt.keys())

    def get_original_prompt(self) -> Prompt:
        return self.original_prompt


def dynamic_prompt(prompt: Prompt | None) -> object:
    """ComfyUI's DynamicPrompt over `prompt` where comfy_execution imports, else the stand-in."""
    try:
        from comfy_execution.graph import DynamicPrompt as comfy_dynamic_prompt
    except ImportError:
        return DynamicPrompt(prompt)
    return comfy_dynamic_prompt(prompt or {})  # ComfyUI's own class, not type-checked here
