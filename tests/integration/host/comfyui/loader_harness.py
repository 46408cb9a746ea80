"""ComfyUI's custom-node loader and node executor, as far as a pack can tell them apart, for tests
where ComfyUI itself cannot be installed (docs/comfyui.md, "Tests").

Written from the facts of ComfyUI's public source at commit
e60e19b175f93f2c8fac037063de9f13259be9d4, none of its code:

- nodes.load_custom_node: a pack directory is imported from its __init__.py by
  importlib.util.spec_from_file_location under a module name that is its path with every "."
  replaced by "_x_"; the module goes into sys.modules before it executes, so the pack's relative
  imports resolve; then NODE_CLASS_MAPPINGS and NODE_DISPLAY_NAME_MAPPINGS are read off it. Names
  starting with "." and ".disabled" directories are skipped.
- execution.py: the output nodes' dependencies run first; each input is a list of items (a
  widget's value is a list of one, a link's is the producer's output list); hidden inputs are
  PROMPT (the prompt), UNIQUE_ID (the node id) and EXTRA_PNGINFO; a class with INPUT_IS_LIST is
  called once with the whole lists, any other once per item of its longest input (shorter lists
  repeat their last item); OUTPUT_IS_LIST slots are concatenated; IS_CHANGED runs before the
  node (mapped like it); FUNCTION is called on an instance of the class.
- V3 classes (comfy_api io.ComfyNode, execution.py at cb707e9c): the schema gives the output
  node and list flags; execute is called on a clone of the class whose `hidden` holds the kinds
  the schema lists (prompt and extra_pnginfo too for an output node); fingerprint_inputs runs
  first where the class overrides it; execute returns an io.NodeOutput.
"""

import importlib.util
import os
import sys


def load_custom_nodes(custom_nodes_dir):
    """(NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS, {pack: exception}) of every pack."""
    classes, display, failed = {}, {}, {}
    for name in sorted(os.listdir(custom_nodes_dir)):
        path = os.path.join(custom_nodes_dir, name)
        if name.startswith(".") or name.endswith(".disabled") or not os.path.isdir(path):
            continue
        if not os.path.isfile(os.path.join(path, "__init__.py")):
            continue
        module_name = path.replace(".", "_x_")
        spec = importlib.util.spec_from_file_location(module_name,
                                                      os.path.join(path, "__init__.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as e:  # ComfyUI logs IMPORT FAILED and goes on with the other packs
            failed[name] = e
            continue
        classes.update(getattr(module, "NODE_CLASS_MAPPINGS", {}) or {})
        display.update(getattr(module, "NODE_DISPLAY_NAME_MAPPINGS", {}) or {})
    return classes, display, failed


def _v3_schema(cls):
    """A V3 class's schema (comfy_api io.ComfyNode), or None for a V1 class."""
    io = sys.modules.get("comfy_api.latest._io")
    if io is None or not isinstance(cls, type) or not issubclass(cls, io.ComfyNode):
        return None
    return cls.define_schema()


def _v3_overrides(cls, name):
    """ComfyUI uses validate_inputs / fingerprint_inputs only where a class overrides the base."""
    for klass in cls.__mro__:
        if name in vars(klass):
            return not getattr(klass, "__module__", "").startswith("comfy_api")
    return False


def _v3_function(cls, schema, prompt, node_id, extra_pnginfo):
    """execute on a clone of the class whose `hidden` holds what the schema lists (and, for an
    output node, the prompt and its extra_pnginfo), as ComfyUI prepares one per call."""
    io = sys.modules["comfy_api.latest._io"]
    kinds = {getattr(h, "value", h) for h in schema.hidden}
    if schema.is_output_node:
        kinds |= {"PROMPT", "EXTRA_PNGINFO"}
    values = {"unique_id": node_id, "prompt": prompt, "extra_pnginfo": extra_pnginfo}
    holder = io.HiddenHolder(**{name: value for name, value in values.items()
                                if name.upper() in kinds})
    clone = type(cls.__name__, (cls,), {"hidden": holder})

    def run(**kwargs):
        out = cls.execute.__func__(clone, **kwargs)
        return tuple(out.args) if isinstance(out, io.NodeOutput) else tuple(out or ())
    return run


def _shape(cls):
    """(output node, number of outputs, input is list, output list flags) of a V1 or V3 class."""
    schema = _v3_schema(cls)
    if schema is None:
        return (getattr(cls, "OUTPUT_NODE", False), len(cls.RETURN_TYPES),
                getattr(cls, "INPUT_IS_LIST", False), getattr(cls, "OUTPUT_IS_LIST", ()))
    return (schema.is_output_node, len(schema.outputs), schema.is_input_list,
            tuple(o.is_output_list for o in schema.outputs))


def _hidden_values(cls, prompt, node_id, extra_pnginfo):
    values = {}
    for kwarg, kind in (cls.INPUT_TYPES().get("hidden") or {}).items():
        if kind == "PROMPT":
            values[kwarg] = [prompt]
        elif kind == "UNIQUE_ID":
            values[kwarg] = [node_id]
        elif kind == "EXTRA_PNGINFO":
            values[kwarg] = [extra_pnginfo]
    return values


def _map_over_lists(cls, fn, data):
    if _shape(cls)[2]:
        return [fn(**data)]
    longest = max((len(v) for v in data.values()), default=1)
    if any(len(v) == 0 for v in data.values()):
        return []
    return [fn(**{k: v[min(i, len(v) - 1)] for k, v in data.items()}) for i in range(longest)]


def _order(prompt, classes):
    """Every node an output node needs, dependencies first."""
    order, seen = [], set()

    def visit(node_id):
        if node_id in seen:
            return
        seen.add(node_id)
        for value in prompt[node_id]["inputs"].values():
            if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str):
                visit(value[0])
        order.append(node_id)

    for node_id in sorted(prompt):
        if _shape(classes[prompt[node_id]["class_type"]])[0]:
            visit(node_id)
    return order


def execute(prompt, classes, extra_pnginfo=None):
    """Runs an API-format prompt: {node id: per output slot, the list of items}."""
    outputs = {}
    for node_id in _order(prompt, classes):
        cls = classes[prompt[node_id]["class_type"]]
        data = {}
        for name, value in prompt[node_id]["inputs"].items():
            if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str):
                data[name] = outputs[value[0]][value[1]]
            else:
                data[name] = [value]
        schema = _v3_schema(cls)
        if schema is None:
            data.update(_hidden_values(cls, prompt, node_id, extra_pnginfo))
            if hasattr(cls, "IS_CHANGED"):
                _map_over_lists(cls, cls.IS_CHANGED, data)
            function = getattr(cls(), cls.FUNCTION)
        else:
            if _v3_overrides(cls, "fingerprint_inputs"):
                _map_over_lists(cls, cls.fingerprint_inputs, data)
            function = _v3_function(cls, schema, prompt, node_id, extra_pnginfo)
        results = _map_over_lists(cls, function, data)
        _output_node, count, _input_is_list, list_slots = _shape(cls)
        slots = []
        for k in range(count):
            items = [r[k] for r in results]
            if k < len(list_slots) and list_slots[k]:
                items = [x for item in items for x in item]
            slots.append(items)
        outputs[node_id] = slots
    return outputs
