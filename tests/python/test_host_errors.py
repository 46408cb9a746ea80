"""What the host bindings say when the host refuses or a node fails (host/_errors.py): the
message a log shows, and "not now" apart from "never" from the host's status code."""

from __future__ import annotations

from comfy_orch._shared import abi
from comfy_orch.host import FAILED, HostError, NodeError


def test_a_deployments_errors_are_listed_with_their_place_and_fix() -> None:
    details = {"diagnostics": [
        {"severity": "error", "file": "d.toml", "line": 3, "column": 1, "key": "memory.cap",
         "message": "not a size", "fix": "write 8GiB"},
        {"severity": "warning", "file": "d.toml", "line": 9, "message": "ignored"},
        {"severity": "error", "message": "no envs"}]}
    error = HostError("invalid_deployment", "the deployment has errors", details)
    assert str(error) == ("invalid_deployment: the deployment has errors"
                          "\n  d.toml:3:1: error: memory.cap: not a size\n    fix: write 8GiB"
                          "\n  deployment: error: no envs")
    assert error.code == "invalid_deployment" and error.details is details


def test_a_node_error_says_not_now_apart_from_never() -> None:
    body = {"type": "execution_error", "message": "boom", "node": "4", "traceback": ["t"]}
    failed = NodeError(body)
    assert (failed.code, failed.message, failed.node, failed.traceback) == (
        "execution_error", "boom", "4", ["t"])
    assert not failed.interrupted and not failed.retryable
    assert NodeError({}, abi.HOST_INTERRUPTED).interrupted
    assert NodeError({}, abi.HOST_RETRYABLE).retryable
    assert NodeError({}, FAILED).code == "node_error"
