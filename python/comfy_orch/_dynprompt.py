"""ComfyUI's DYNPROMPT hidden value in a worker (docs/python.md). ComfyUI passes its
comfy_execution.graph.DynamicPrompt: the prompt as it runs, ephemeral nodes included. The worker
builds one from the PROMPT the host sent: ComfyUI's own class where the worker can import it (the
deployment names a ComfyUI root), else this read-only stand-in with the same read methods. The
host expands no subgraphs, so there are no ephemeral nodes to add or look up."""


class NodeNotFoundError(Exception):
    pass


class DynamicPrompt:
    def __init__(self, original_prompt):
        self.original_prompt = original_prompt or {}

    def get_node(self, node_id):
        if node_id not in self.original_prompt:
            raise NodeNotFoundError("Node %s not found" % node_id)
        return self.original_prompt[node_id]

    def has_node(self, node_id):
        return node_id in self.original_prompt

    def add_ephemeral_node(self, node_id, node_info, parent_id, display_id):
        raise NotImplementedError("comfy-orch does not expand subgraphs inside a worker")

    def get_real_node_id(self, node_id):
        return node_id

    def get_parent_node_id(self, node_id):
        return None

    def get_display_node_id(self, node_id):
        return node_id

    def all_node_ids(self):
        return set(self.original_prompt.keys())

    def get_original_prompt(self):
        return self.original_prompt


def dynamic_prompt(prompt):
    try:
        from comfy_execution.graph import DynamicPrompt as comfy_dynamic_prompt
    except ImportError:
        return DynamicPrompt(prompt)
    return comfy_dynamic_prompt(prompt or {})
