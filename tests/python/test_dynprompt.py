"""DYNPROMPT in a worker without ComfyUI (worker/_dynprompt.py): the prompt the host sent, read
with ComfyUI's DynamicPrompt methods; nothing ephemeral, as the host expands no subgraphs."""

from __future__ import annotations

import pytest

from comfy_orch.worker._dynprompt import DynamicPrompt, NodeNotFoundError, dynamic_prompt

PROMPT = {"1": {"class_type": "Load", "inputs": {}},
          "2": {"class_type": "Blur", "inputs": {"image": ["1", 0]}}}


def test_nodes_are_read_as_comfyui_reads_them() -> None:
    d = DynamicPrompt(PROMPT)
    assert d.get_node("2") == PROMPT["2"]
    assert d.has_node("1") and not d.has_node("3")
    assert d.all_node_ids() == {"1", "2"}
    assert d.get_original_prompt() is PROMPT


def test_a_missing_node_raises_comfyuis_not_found() -> None:
    with pytest.raises(NodeNotFoundError, match="Node 9 not found"):
        DynamicPrompt(PROMPT).get_node("9")


def test_every_node_is_real_and_its_own_display_node() -> None:
    d = DynamicPrompt(PROMPT)
    assert (d.get_real_node_id("2"), d.get_display_node_id("2")) == ("2", "2")
    assert d.get_parent_node_id("2") is None
    with pytest.raises(NotImplementedError, match="does not expand subgraphs"):
        d.add_ephemeral_node("3", {}, "2", "2")


def test_without_comfyui_the_stand_in_serves_and_no_prompt_is_empty() -> None:
    d = dynamic_prompt(None)
    assert isinstance(d, DynamicPrompt) and d.all_node_ids() == set()
