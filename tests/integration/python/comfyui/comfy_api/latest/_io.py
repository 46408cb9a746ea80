"""The V3 io module's shapes: typed inputs and outputs, the schema, the node base class.

The members comfy-orch touches behave as in ComfyUI a125cd84 (docs/comfyui-fixture.md has the
table): ComfyNode derives from comfy_api.internal._ComfyNodeInternal and has V1's INPUT_TYPES
and FUNCTION ("EXECUTE_NORMALIZED"); HiddenHolder takes six required values and is built with
from_dict; NodeOutput derives from _NodeOutputInternal."""

import enum
import inspect

from comfy_api.internal import _ComfyNodeInternal, _NodeOutputInternal


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
        out = {}
        for key in ("display_name", "tooltip", "lazy"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


class _Widget(_Input):
    def __init__(self, id, display_name=None, optional=False, tooltip=None, lazy=None,
                 default=None, socketless=None, **options):
        super().__init__(id, display_name, optional, tooltip, lazy)
        self.default = default
        self.options_extra = options

    def as_dict(self):
        out = super().as_dict()
        if self.default is not None:
            out["default"] = self.default
        out.update({k: v for k, v in self.options_extra.items() if v is not None})
        return out


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

    class Output(_Output):
        io_type = "COMBO"


class Schema:
    def __init__(self, node_id, display_name=None, category="sd", inputs=None, outputs=None,
                 hidden=None, description="", is_output_node=False, is_input_list=False,
                 is_deprecated=False, is_experimental=False, not_idempotent=False,
                 enable_expand=False):
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
        self.not_idempotent = not_idempotent
        self.enable_expand = enable_expand


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
        return cls.SCHEMA

    # V1's surface, which ComfyUI's own V3 base class has too: a V3 class is told apart by its
    # base, never by INPUT_TYPES missing.
    @classmethod
    def INPUT_TYPES(cls, include_hidden=True, return_schema=False):
        schema = cls.GET_SCHEMA()
        out = {"required": {}, "optional": {}}
        for i in schema.inputs:
            out["optional" if i.optional else "required"][i.id] = (i.get_io_type(),
                                                                   i.as_dict())
        if include_hidden and schema.hidden:
            out["hidden"] = {str(getattr(h, "value", h)).lower(): str(getattr(h, "value", h))
                             for h in schema.hidden}
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
