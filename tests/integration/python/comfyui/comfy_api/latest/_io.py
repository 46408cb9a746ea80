"""The V3 io module's shapes: typed inputs and outputs, the schema, the node base class.

The members comfy-orch touches behave as in ComfyUI a125cd84 (docs/comfyui-fixture.md has the
table): ComfyNode derives from comfy_api.internal._ComfyNodeInternal and has V1's INPUT_TYPES
and FUNCTION ("EXECUTE_NORMALIZED"); HiddenHolder takes six required values and is built with
from_dict; NodeOutput derives from _NodeOutputInternal; GET_NODE_INFO_V1 is asdict() of
Schema.get_v1_info (fifteen keys, None where unset; an input is (io_type, as_dict() without
"optional"); a hidden one is keyed by the io.Hidden member's name, valued (its value,));
python_module is the class's RELATIVE_PYTHON_MODULE, which ComfyUI's loader sets."""

import dataclasses
import enum
import inspect

from comfy_api.internal import _ComfyNodeInternal, _NodeOutputInternal, prune_dict


class Hidden(str, enum.Enum):
    unique_id = "UNIQUE_ID"
    prompt = "PROMPT"
    extra_pnginfo = "EXTRA_PNGINFO"
    dynprompt = "DYNPROMPT"
    auth_token_comfy_org = "AUTH_TOKEN_COMFY_ORG"
    api_key_comfy_org = "API_KEY_COMFY_ORG"


class _Input:
    io_type = None

    def __init__(self, id, display_name=None, optional=False, tooltip=None, lazy=None):
        self.id = id
        self.display_name = display_name
        self.optional = optional
        self.tooltip = tooltip
        self.lazy = lazy

    def get_io_type(self):
        return self.io_type

    def as_dict(self):
        return prune_dict({"display_name": self.display_name, "optional": self.optional,
                           "tooltip": self.tooltip, "lazy": self.lazy})


class _Widget(_Input):
    """A widget input: its type's own options (min, max, step, multiline, ...) come after the
    base's keys, as each real type's as_dict adds them."""

    def __init__(self, id, display_name=None, optional=False, tooltip=None, lazy=None,
                 default=None, socketless=None, force_input=None, **options):
        super().__init__(id, display_name, optional, tooltip, lazy)
        self.default = default
        self.socketless = socketless
        self.force_input = force_input
        self.options_extra = options

    def as_dict(self):
        return (super().as_dict() |
                prune_dict({"default": self.default, "socketless": self.socketless,
                            "forceInput": self.force_input}) |
                prune_dict(self.options_extra))


class _Output:
    io_type = None

    def __init__(self, id=None, display_name=None, tooltip=None, is_output_list=False):
        self.id = id
        self.display_name = display_name
        self.tooltip = tooltip
        self.is_output_list = is_output_list

    def get_io_type(self):
        return self.io_type


def _comfytype(io_type, widget):
    base = _Widget if widget else _Input

    class Type:
        class Input(base):
            pass

        class Output(_Output):
            pass

    Type.io_type = io_type
    Type.Input.io_type = io_type
    Type.Output.io_type = io_type
    return Type


def Custom(io_type):
    """A type of any name (a pack's own, or a core type the io module does not name)."""
    return _comfytype(io_type, False)


AnyType = _comfytype("*", False)
Int = _comfytype("INT", True)
Float = _comfytype("FLOAT", True)
String = _comfytype("STRING", True)
Boolean = _comfytype("BOOLEAN", True)
Image = _comfytype("IMAGE", False)
Mask = _comfytype("MASK", False)
Latent = _comfytype("LATENT", False)
Model = _comfytype("MODEL", False)


class Combo:
    io_type = "COMBO"

    class Input(_Widget):
        io_type = "COMBO"

        def __init__(self, id, options=None, **kwargs):
            super().__init__(id, **kwargs)
            self.options = list(options or [])

        def as_dict(self):
            return super().as_dict() | {"multiselect": False, "options": self.options}

    class Output(_Output):
        io_type = "COMBO"


class Schema:
    def __init__(self, node_id, display_name=None, category="sd", inputs=None, outputs=None,
                 hidden=None, description="", is_output_node=False, is_input_list=False,
                 is_deprecated=False, is_experimental=False, is_api_node=False,
                 not_idempotent=False, enable_expand=False):
        self.node_id = node_id
        self.display_name = display_name
        self.category = category
        self.inputs = inputs or []
        self.outputs = outputs or []
        self.hidden = hidden or []
        self.description = description
        self.is_output_node = is_output_node
        self.is_input_list = is_input_list
        self.is_deprecated = is_deprecated
        self.is_experimental = is_experimental
        self.is_api_node = is_api_node
        self.not_idempotent = not_idempotent
        self.enable_expand = enable_expand

    def finalize(self):
        """The hidden values an API node and an output node need, and an id for every output."""
        wanted = ([Hidden.auth_token_comfy_org, Hidden.api_key_comfy_org] if self.is_api_node
                  else []) + ([Hidden.prompt, Hidden.extra_pnginfo] if self.is_output_node else [])
        for kind in wanted:
            if kind not in self.hidden:
                self.hidden.append(kind)
        for k, output in enumerate(self.outputs):
            if output.id is None:
                output.id = "_%d_%s_" % (k, output.io_type)

    def get_v1_info(self, cls):
        inputs = {"required": {}}
        for i in self.inputs:
            options = i.as_dict()
            options.pop("optional", None)
            inputs.setdefault("optional" if i.optional else "required", {})[i.id] = (
                i.get_io_type(), options)
        for kind in self.hidden:
            inputs.setdefault("hidden", {})[kind.name] = (kind.value,)
        return NodeInfoV1(
            input=inputs,
            input_order={key: list(value) for key, value in inputs.items()},
            output=[o.io_type for o in self.outputs],
            output_is_list=[o.is_output_list for o in self.outputs],
            output_name=[o.display_name or o.io_type for o in self.outputs],
            output_tooltips=[o.tooltip or None for o in self.outputs],
            name=self.node_id, display_name=self.display_name, category=self.category,
            description=self.description, output_node=self.is_output_node,
            deprecated=self.is_deprecated, experimental=self.is_experimental,
            api_node=self.is_api_node,
            python_module=getattr(cls, "RELATIVE_PYTHON_MODULE", "nodes"))


@dataclasses.dataclass
class NodeInfoV1:
    input: dict = None
    input_order: dict = None
    output: list = None
    output_is_list: list = None
    output_name: list = None
    output_tooltips: list = None
    name: str = None
    display_name: str = None
    description: str = None
    python_module: object = None
    category: str = None
    output_node: bool = None
    deprecated: bool = None
    experimental: bool = None
    api_node: bool = None


class NodeOutput(_NodeOutputInternal):
    def __init__(self, *args, ui=None, expand=None, block_execution=None):
        self.args = args
        self.ui = ui
        self.expand = expand
        self.block_execution = block_execution

    @property
    def result(self):
        return self.args if len(self.args) > 0 else None

    @classmethod
    def from_dict(cls, data):
        # As ComfyUI's at a125cd8, args= included: NodeOutput takes no such keyword, so a V3
        # execute that returns a dict fails there with a TypeError, and here too.
        return cls(args=data.get("result", ()), ui=data.get("ui"), expand=data.get("expand"))

    def __getitem__(self, index):
        return self.args[index]


class HiddenHolder:
    def __init__(self, unique_id, prompt, extra_pnginfo, dynprompt, auth_token_comfy_org,
                 api_key_comfy_org, **kwargs):
        self.unique_id = unique_id
        self.prompt = prompt
        self.extra_pnginfo = extra_pnginfo
        self.dynprompt = dynprompt
        self.auth_token_comfy_org = auth_token_comfy_org
        self.api_key_comfy_org = api_key_comfy_org

    def __getattr__(self, key):
        return None  # a hidden value the node did not ask for

    @classmethod
    def from_dict(cls, d):
        d = d or {}
        return cls(*(d.get(kind) for kind in (Hidden.unique_id, Hidden.prompt,
                                                 Hidden.extra_pnginfo, Hidden.dynprompt,
                                                 Hidden.auth_token_comfy_org,
                                                 Hidden.api_key_comfy_org)))


class _ClassProperty:
    def __init__(self, getter):
        self.getter = getter

    def __get__(self, instance, owner):
        return self.getter(owner)


class ComfyNode(_ComfyNodeInternal):
    hidden = None
    SCHEMA = None
    RELATIVE_PYTHON_MODULE = None  # set by ComfyUI's loader: "custom_nodes.<pack>"

    @classmethod
    def define_schema(cls):
        raise NotImplementedError

    @classmethod
    def execute(cls, **kwargs):
        raise NotImplementedError

    # ComfyUI's base class declares these; a node class that does not override them has none.
    @classmethod
    def validate_inputs(cls, **kwargs):
        raise NotImplementedError

    @classmethod
    def fingerprint_inputs(cls, **kwargs):
        raise NotImplementedError

    @classmethod
    def check_lazy_status(cls, **kwargs):
        return [name for name in kwargs if kwargs[name] is None]

    @classmethod
    def GET_BASE_CLASS(cls):
        return ComfyNode

    @classmethod
    def GET_SCHEMA(cls):
        cls.SCHEMA = cls.define_schema()
        cls.SCHEMA.finalize()
        return cls.SCHEMA

    @classmethod
    def GET_NODE_INFO_V1(cls):
        """What ComfyUI's /object_info answers for the class (server.py's node_info)."""
        return dataclasses.asdict(cls.GET_SCHEMA().get_v1_info(cls))

    # V1's surface, which ComfyUI's own V3 base class has too: a V3 class is told apart by its
    # base, never by INPUT_TYPES missing.
    @classmethod
    def INPUT_TYPES(cls, include_hidden=True, return_schema=False):
        schema = cls.GET_SCHEMA()
        out = schema.get_v1_info(cls).input
        if not include_hidden:
            out.pop("hidden", None)
        return (out, schema) if return_schema else out

    FUNCTION = _ClassProperty(lambda cls: "EXECUTE_NORMALIZED_ASYNC"
                              if inspect.iscoroutinefunction(cls.execute)
                              else "EXECUTE_NORMALIZED")

    @classmethod
    def _normalized(cls, value):
        if value is None:
            return NodeOutput()
        if isinstance(value, NodeOutput):
            out = value
        elif isinstance(value, tuple):
            out = NodeOutput(*value)
        elif isinstance(value, dict):
            out = NodeOutput.from_dict(value)
        else:
            raise Exception("Invalid return type from node: %s" % type(value))
        if out.expand is not None and not cls.GET_SCHEMA().enable_expand:
            raise Exception("Node %s is not expandable, but expand included in NodeOutput"
                            % cls.__name__)
        return out

    @classmethod
    def EXECUTE_NORMALIZED(cls, *args, **kwargs):
        return cls._normalized(cls.execute(*args, **kwargs))

    @classmethod
    async def EXECUTE_NORMALIZED_ASYNC(cls, *args, **kwargs):
        return cls._normalized(await cls.execute(*args, **kwargs))

    @classmethod
    def PREPARE_CLASS_CLONE(cls, hidden_inputs):
        """A copy of the class, per call, whose `hidden` holds the call's hidden values."""
        clone = type(cls.__name__, (cls,), {"__module__": cls.__module__})
        clone.hidden = HiddenHolder.from_dict(hidden_inputs)
        return clone
