"""ComfyUI's custom-node loader and node executor, as far as a pack can tell them apart, for tests
where ComfyUI itself cannot be installed (docs/comfyui.md, "Tests").

Written from the facts of ComfyUI's public source at commit
e60e19b175f93f2c8fac037063de9f13259be9d4, none of its code:

- main.py's execute_prestartup_script: before any pack loads, every pack's
  prestartup_script.py is executed from its path; a failing one is logged and skipped.
- nodes.load_custom_node: a pack directory is imported from its __init__.py by
  importlib.util.spec_from_file_location under a module name that is its path with every "."
  replaced by "_x_"; the module goes into sys.modules before it executes, so the pack's relative
  imports resolve; then NODE_CLASS_MAPPINGS and NODE_DISPLAY_NAME_MAPPINGS are read off it, and
  each class gets RELATIVE_PYTHON_MODULE = "custom_nodes.<pack directory name>" (a125cd84). Names
  starting with "." and ".disabled" directories are skipped.
- server.py's node_info (a125cd84): GET /object_info's entry of a class; a V3 class answers its
  GET_NODE_INFO_V1(), a V1 class the dict node_info() below builds from its attributes.
- execution.py: the output nodes' dependencies run first; each input is a list of items (a
  widget's value is a list of one, a link's is the producer's output list); hidden inputs are
  PROMPT (the prompt), UNIQUE_ID (the node id) and EXTRA_PNGINFO; a class with INPUT_IS_LIST is
  called once with the whole lists, any other once per item of its longest input (shorter lists
  repeat their last item); OUTPUT_IS_LIST slots are concatenated; IS_CHANGED runs before the
  node (mapped like it); FUNCTION is called on an instance of the class.
- V3 classes (execution.py at a125cd84): a class is V3 when it subclasses
  comfy_api.internal._ComfyNodeInternal; FUNCTION (EXECUTE_NORMALIZED) and fingerprint_inputs
  are called on cls.PREPARE_CLASS_CLONE(hidden), where hidden holds the kinds the schema lists,
  keyed by io.Hidden (at 618b803d, 0.8: PREPARE_CLASS_CLONE(v3_data), v3_data from
  _io.get_finalized_class_inputs over the node's inputs with hidden_inputs added, and each
  call's arguments nested by _io.build_nested_inputs); INPUT_IS_LIST and OUTPUT_IS_LIST are
  read off the class (getattr), which a V3 class's own attribute overrides; fingerprint_inputs
  runs first where the class overrides the base's (first_real_override).
  Every call of a node's function, IS_CHANGED included, runs inside
  comfy_execution.utils.CurrentNodeContext(prompt_id, node_id, list_index).
- get_output_from_returns: a dict result gives its "ui" and "result"; a NodeOutput its ui (a
  dict, or as_dict() of a UI object) and its args. A result with "expand" (a dict's, or a
  NodeOutput's) is a subgraph: its nodes join the prompt (ephemeral nodes of the dynamic
  prompt), run, and the node's outputs are the values its result's links ([node id, slot])
  point to.
"""

import contextlib
import importlib.util
import os
import sys
import uuid


def run_prestartup_scripts(custom_nodes_dir):
    """{pack: exception} of main.py's execute_prestartup_script: each pack's prestartup_script.py
    runs before any pack is loaded, as a module named after the script's path, its failure
    logged and the next one run."""
    failed = {}
    for name in sorted(os.listdir(custom_nodes_dir)):
        script = os.path.join(custom_nodes_dir, name, "prestartup_script.py")
        if name.startswith(".") or name.endswith(".disabled") or not os.path.isfile(script):
            continue
        spec = importlib.util.spec_from_file_location(os.path.splitext(script)[0], script)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as e:  # ComfyUI prints "Failed to execute startup-script" and goes on
            failed[name] = e
    return failed


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
        loaded = getattr(module, "NODE_CLASS_MAPPINGS", {}) or {}
        for cls in loaded.values():
            cls.RELATIVE_PYTHON_MODULE = "custom_nodes." + name
        classes.update(loaded)
        display.update(getattr(module, "NODE_DISPLAY_NAME_MAPPINGS", {}) or {})
    return classes, display, failed


def node_info(class_type, cls, display):
    """server.py's node_info: the class's GET /object_info entry."""
    internal = sys.modules.get("comfy_api.internal")
    base = getattr(internal, "_ComfyNodeInternal", None)
    if base is not None and issubclass(cls, base):
        return cls.GET_NODE_INFO_V1()
    info = {"input": cls.INPUT_TYPES(),
            "input_order": {key: list(value.keys()) for key, value in cls.INPUT_TYPES().items()},
            "output": cls.RETURN_TYPES}
    info["output_is_list"] = (cls.OUTPUT_IS_LIST if hasattr(cls, "OUTPUT_IS_LIST")
                              else [False] * len(cls.RETURN_TYPES))
    info["output_name"] = cls.RETURN_NAMES if hasattr(cls, "RETURN_NAMES") else info["output"]
    info["name"] = class_type
    info["display_name"] = display[class_type] if class_type in display else class_type
    info["description"] = cls.DESCRIPTION if hasattr(cls, "DESCRIPTION") else ""
    info["python_module"] = getattr(cls, "RELATIVE_PYTHON_MODULE", "nodes")
    info["category"] = cls.CATEGORY if hasattr(cls, "CATEGORY") else "sd"
    info["output_node"] = hasattr(cls, "OUTPUT_NODE") and cls.OUTPUT_NODE == True  # noqa: E712
    if hasattr(cls, "OUTPUT_TOOLTIPS"):
        info["output_tooltips"] = cls.OUTPUT_TOOLTIPS
    if getattr(cls, "DEPRECATED", False):
        info["deprecated"] = True
    if getattr(cls, "EXPERIMENTAL", False):
        info["experimental"] = True
    if hasattr(cls, "API_NODE"):
        info["api_node"] = cls.API_NODE
    return info


def _v3_schema(cls):
    """A V3 class's schema, or None for a V1 class: V3 is a subclass of
    comfy_api.internal._ComfyNodeInternal (every API version's ComfyNode), as execution.py tells
    them apart; a real ComfyNode has INPUT_TYPES and FUNCTION too."""
    internal = sys.modules.get("comfy_api.internal")
    base = getattr(internal, "_ComfyNodeInternal", None)
    if base is None or not isinstance(cls, type) or not issubclass(cls, base):
        return None
    return cls.GET_SCHEMA()


def _v3_overrides(cls, name):
    """ComfyUI uses validate_inputs / fingerprint_inputs only where a class overrides the base."""
    internal = sys.modules["comfy_api.internal"]
    return internal.first_real_override(cls, name) is not None


def _v3_hidden(schema, prompt, node_id, extra_pnginfo):
    """get_input_data's hidden_inputs_v3: the kinds the schema lists, keyed by io.Hidden."""
    io = sys.modules["comfy_api.latest._io"]
    values = {io.Hidden.prompt: prompt, io.Hidden.unique_id: node_id,
              io.Hidden.extra_pnginfo: extra_pnginfo}
    return {kind: value for kind, value in values.items() if kind in schema.hidden}


def _v3_function(cls, schema, name, prompt, node_id, extra_pnginfo):
    """`name` (FUNCTION, fingerprint_inputs, ...) on PREPARE_CLASS_CLONE, as
    _async_map_node_over_list calls a V3 class. The tree's own code decides what the clone
    takes: where its io module has get_finalized_class_inputs (ComfyUI 0.7 on), a V3Data whose
    dynamic paths come from it over the node's inputs, each call's arguments nested by its
    build_nested_inputs; before, the hidden values alone."""
    io = sys.modules["comfy_api.latest._io"]
    hidden = _v3_hidden(schema, prompt, node_id, extra_pnginfo)
    finalize = getattr(io, "get_finalized_class_inputs", None)
    if finalize is None:
        return getattr(cls.PREPARE_CLASS_CLONE(hidden), name)
    v3_data = finalize(cls.INPUT_TYPES(), prompt[node_id]["inputs"])[2]
    v3_data["hidden_inputs"] = hidden
    function = getattr(cls.PREPARE_CLASS_CLONE(v3_data), name)
    return lambda **args: function(**io.build_nested_inputs(args, v3_data))


def _results(returned):
    """get_output_from_returns: each call's result tuple, its ui (a dict result's "ui", a
    NodeOutput's ui, as_dict()ed) and its subgraph (a result's "expand", or None)."""
    internal = sys.modules.get("comfy_api.internal")
    v3_output = getattr(internal, "_NodeOutputInternal", ())
    results, uis, graphs = [], [], []
    for r in returned:
        if isinstance(r, dict):
            if "ui" in r:
                uis.append(r["ui"])
            if "result" in r:
                results.append(r["result"])
                graphs.append(r.get("expand"))
        elif v3_output and isinstance(r, v3_output):
            if r.ui is not None:
                uis.append(r.ui if isinstance(r.ui, dict) else r.ui.as_dict())
            if r.result is not None:
                results.append(r.result)
                graphs.append(r.expand)
        else:
            results.append(r)
            graphs.append(None)
    return results, uis, graphs


def _shape(cls):
    """(output node, number of outputs, input is list, output list flags) of a V1 or V3 class."""
    schema = _v3_schema(cls)
    if schema is None:
        return (getattr(cls, "OUTPUT_NODE", False), len(cls.RETURN_TYPES),
                getattr(cls, "INPUT_IS_LIST", False), getattr(cls, "OUTPUT_IS_LIST", ()))
    # The list flags as the executor reads them off the class: a V3 class's own INPUT_IS_LIST
    # attribute wins over its schema (the base's class properties answer that).
    return (schema.is_output_node, len(schema.outputs), getattr(cls, "INPUT_IS_LIST", False),
            tuple(cls.OUTPUT_IS_LIST))


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


def _in_context(prompt_id, node_id, index):
    """execution.py's CurrentNodeContext, where this ComfyUI has one."""
    try:
        from comfy_execution.utils import CurrentNodeContext
    except ImportError:
        return contextlib.nullcontext()
    return CurrentNodeContext(prompt_id, node_id, index)


def _map_over_lists(cls, fn, data, prompt_id, node_id):
    def call(index, args):
        with _in_context(prompt_id, node_id, index):
            return fn(**args)
    if _shape(cls)[2]:
        return [call(None, data)]
    longest = max((len(v) for v in data.values()), default=1)
    if any(len(v) == 0 for v in data.values()):
        return []
    return [call(i, {k: v[min(i, len(v) - 1)] for k, v in data.items()}) for i in range(longest)]


def _order(prompt, classes):
    """Every node an output node needs, dependencies first."""
    return _needed(prompt, [node_id for node_id in sorted(prompt)
                            if _shape(classes[prompt[node_id]["class_type"]])[0]])


def _needed(prompt, targets):
    """The targets and every node they need, dependencies first."""
    order, seen = [], set()

    def visit(node_id):
        if node_id in seen:
            return
        seen.add(node_id)
        for value in prompt[node_id]["inputs"].values():
            if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str):
                visit(value[0])
        order.append(node_id)

    for node_id in targets:
        visit(node_id)
    return order


def _link(value):
    return isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)


def execute(prompt, classes, extra_pnginfo=None, uis=None):
    """Runs an API-format prompt: {node id: per output slot, the list of items}. `uis`, when
    given, collects {node id: [ui, ...]} (what ComfyUI's executed message carries)."""
    outputs = {}
    _run(dict(prompt), classes, _order(prompt, classes), outputs, str(uuid.uuid4()),
         extra_pnginfo, uis)
    return outputs


def _run(prompt, classes, order, outputs, prompt_id, extra_pnginfo, uis):
    for node_id in order:
        if node_id in outputs:
            continue
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
                _map_over_lists(cls, cls.IS_CHANGED, data, prompt_id, node_id)
            function = getattr(cls(), cls.FUNCTION)
        else:
            if _v3_overrides(cls, "fingerprint_inputs"):
                _map_over_lists(cls, _v3_function(cls, schema, "fingerprint_inputs", prompt,
                                                  node_id, extra_pnginfo), data, prompt_id,
                                node_id)
            function = _v3_function(cls, schema, cls.FUNCTION, prompt, node_id, extra_pnginfo)
        results, node_uis, graphs = _results(_map_over_lists(cls, function, data, prompt_id,
                                                             node_id))
        for k, graph in enumerate(graphs):
            if graph is not None:  # the subgraph runs; the node's outputs are its links' values
                prompt.update(graph)
                _run(prompt, classes, _needed(prompt, [v[0] for v in results[k] if _link(v)]),
                     outputs, prompt_id, extra_pnginfo, uis)
                results[k] = tuple(outputs[v[0]][v[1]][0] if _link(v) else v
                                   for v in results[k])
        if uis is not None and node_uis:
            uis[node_id] = node_uis
        _output_node, count, _input_is_list, list_slots = _shape(cls)
        slots = []
        for k in range(count):
            items = [r[k] for r in results]
            if k < len(list_slots) and list_slots[k]:
                items = [x for item in items for x in item]
            slots.append(items)
        outputs[node_id] = slots
    return outputs
