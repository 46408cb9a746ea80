"""ComfyUI's executing-node context (comfy_execution/utils.py at a125cd84): execution.py runs each
call of a node's function (and of IS_CHANGED) inside CurrentNodeContext(prompt_id, node_id,
list_index), and get_executing_context() answers that context, or None outside a node. A
contextvar, so each asyncio task and thread sees its own."""

import contextvars
from typing import NamedTuple, Optional


class ExecutionContext(NamedTuple):
    prompt_id: str
    node_id: str
    list_index: Optional[int]


current_executing_context = contextvars.ContextVar("current_executing_context", default=None)


def get_executing_context():
    return current_executing_context.get(None)


class CurrentNodeContext:
    def __init__(self, prompt_id, node_id, list_index=None):
        self.context = ExecutionContext(prompt_id, node_id, list_index)
        self.token = None

    def __enter__(self):
        self.token = current_executing_context.set(self.context)
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        if self.token is not None:
            current_executing_context.reset(self.token)
