"""Fixtures of the package's unit tests: a node call in progress over the fake worker API."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from comfy_orch._shared import serializers
from comfy_orch.worker import _call
from fake_worker import FakeWorker


@pytest.fixture
def worker(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeWorker]:
    """A call of node 7 in progress, as the worker runtime has one during a node's execute;
    numpy tensors (a pack that never imported torch)."""
    monkeypatch.setenv("COMFY_ORCH_TENSORS", "numpy")
    fake = FakeWorker()
    monkeypatch.setattr(_call, "current", _call.Call(fake.ctx, "7"))
    yield fake


@pytest.fixture
def no_serializers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process's registered serializers start empty and are put back after the test."""
    monkeypatch.setattr(serializers, "_by_type", {})
    monkeypatch.setattr(serializers, "_by_tag", {})
