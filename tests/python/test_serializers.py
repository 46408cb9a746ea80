"""How values that are not plain cross between processes (_shared/serializers.py): the marks,
and the serializers a pack registers with comfy-env's register_serializer."""

from __future__ import annotations

from typing import Any

import pytest

from comfy_orch._shared import serializers
from comfy_orch._shared.serializers import MARK, TUPLE


class Mesh:
    def __init__(self, points: list[Any]) -> None:
        self.points = points


class SubMesh(Mesh):
    pass


def register_mesh() -> None:
    serializers.register("Mesh", lambda m, recurse: {"points": recurse(m.points)},
                         lambda payload, recurse: Mesh(recurse(payload["points"])))


def test_a_registered_type_and_its_subclasses_encode_as_a_marked_payload(
        no_serializers: None) -> None:
    register_mesh()
    assert serializers.encode(Mesh([1, 2])) == {MARK: "Mesh", "payload": {"points": [1, 2]}}
    assert serializers.encode(SubMesh([3])) == {MARK: "Mesh", "payload": {"points": [3]}}
    assert serializers.encode(object()) is None


def test_a_payload_decodes_with_its_tags_deserializer_nested_ones_too(
        no_serializers: None) -> None:
    register_mesh()
    marked = serializers.encode_nested({"a": [Mesh([Mesh([1])])]})
    back = serializers.decode_nested(marked)
    outer = back["a"][0]
    assert isinstance(outer, Mesh) and isinstance(outer.points[0], Mesh)
    assert outer.points[0].points == [1]


def test_a_tag_without_a_deserializer_stays_the_marked_dict(no_serializers: None) -> None:
    marked = {MARK: "Unknown", "payload": 5}
    assert serializers.decode(marked) is marked
    serializers.register("Only", lambda o, r: 1, tag="only-out")
    assert serializers.decode({MARK: "only-out", "payload": 1}) == {MARK: "only-out",
                                                                     "payload": 1}


def test_a_marked_tuple_is_a_tuple_again() -> None:
    assert serializers.decode({TUPLE: [1, {TUPLE: [2]}]}) == (1, (2,))
    assert serializers.decode({TUPLE: [1], "other": 2}) == {TUPLE: [1], "other": 2}


def test_register_refuses_what_it_cannot_use(no_serializers: None) -> None:
    with pytest.raises(TypeError, match="type_name is the class's __name__"):
        serializers.register("", lambda o, r: o)
    with pytest.raises(TypeError, match="must be callables"):
        serializers.register("Mesh", "not callable")  # type: ignore[arg-type]
