"""Tools written in Python: plain functions (sync or async) whose argument
schema comes from their type hints, or from pydantic models when pydantic
is installed."""

import inspect
import json
import typing
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Optional

from ._toolhost import ToolError

try:  # pydantic is optional: with it, any type it knows is a tool argument.
    import pydantic
except ImportError:  # pragma: no cover - exercised where pydantic is absent
    pydantic = None


@dataclass(frozen=True)
class ToolResult:
    """A result spelled out: `content` items (MCP dicts), `structured`
    content (a dict), and whether it `is_error`. Return it from a tool to
    say exactly what the caller gets."""

    content: tuple = ()
    structured: Optional[dict] = None
    is_error: bool = False

    def to_dict(self) -> dict:
        out: dict = {"content": list(self.content)}
        if self.structured is not None:
            out["structuredContent"] = self.structured
        if self.is_error:
            out["isError"] = True
        return out


def tool(
    function: Optional[Callable] = None,
    *,
    name: Optional[str] = None,
    title: Optional[str] = None,
    description: Optional[str] = None,
    annotations: Optional[dict] = None,
    output_schema: Optional[dict] = None,
):
    """Mark `function` as a tool, naming what its signature does not say:
    `name` (else the function's), `title`, `description` (else its
    docstring), MCP `annotations` (`readOnlyHint`, ...), `output_schema`.
    Usable bare (`@tool`) or with arguments (`@tool(name="...")`)."""

    def mark(function: Callable) -> Callable:
        function.__toolhost_tool__ = {
            "name": name,
            "title": title,
            "description": description,
            "annotations": annotations,
            "output_schema": output_schema,
        }
        return function

    return mark(function) if function is not None else mark


_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object", list: "array"}


def _hint_schema(hint: Any) -> dict:
    """The JSON Schema of a type hint, without pydantic: the JSON types,
    lists, dicts of strings, `Optional`, `Literal`."""
    if hint is Any or hint is inspect.Parameter.empty:
        return {}
    if hint in _SIMPLE:
        return {"type": _SIMPLE[hint]}
    if hint is type(None):
        return {"type": "null"}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (list, tuple, set, frozenset):
        return {"type": "array", "items": _hint_schema(args[0])} if args else {"type": "array"}
    if origin is dict:
        return {"type": "object", "additionalProperties": _hint_schema(args[1])} if args else {"type": "object"}
    if origin is typing.Union or str(origin) == "types.UnionType":
        return {"anyOf": [_hint_schema(arg) for arg in args]}
    raise TypeError(f"toolhost cannot describe the type {hint!r} without pydantic; install pydantic")


def _is_model(hint: Any) -> bool:
    return pydantic is not None and isinstance(hint, type) and issubclass(hint, pydantic.BaseModel)


def _result(value: Any) -> dict:
    """A function's return value as MCP's CallToolResult."""
    if isinstance(value, ToolResult):
        return value.to_dict()
    if value is None:
        return {"content": []}
    if isinstance(value, str):
        return {"content": [{"type": "text", "text": value}]}
    if _is_model(type(value)):
        value = value.model_dump(mode="json")
    text = json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        return {"content": [{"type": "text", "text": text}], "structuredContent": value}
    return {"content": [{"type": "text", "text": text}]}


def describe(function: Callable) -> tuple:
    """The MCP `Tool` of `function` and the `invoke(arguments, meta)` that
    runs it: what `Registry.add_tools` registers."""
    marks = getattr(function, "__toolhost_tool__", {})
    name = marks.get("name") or function.__name__
    signature = inspect.signature(function)
    hints = typing.get_type_hints(function)
    parameters = list(signature.parameters.values())
    for parameter in parameters:
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD, parameter.POSITIONAL_ONLY):
            raise TypeError(f"tool `{name}`: parameter `{parameter.name}` must be an ordinary named parameter")
    model = None
    if pydantic is not None:
        fields = {
            p.name: (hints.get(p.name, Any), ... if p.default is p.empty else p.default) for p in parameters
        }
        model = pydantic.create_model(
            f"{name}_arguments", __config__=pydantic.ConfigDict(extra="forbid"), **fields
        )
        schema = model.model_json_schema()
        schema.pop("title", None)
    else:
        schema = {
            "type": "object",
            "properties": {p.name: _hint_schema(hints.get(p.name, Any)) for p in parameters},
            "required": [p.name for p in parameters if p.default is p.empty],
        }
    schema.setdefault("properties", {})
    schema["type"] = "object"
    # The function takes its parameters and nothing else: other members are
    # refused before it runs, with their pointers.
    schema["additionalProperties"] = False
    output_schema = marks.get("output_schema")
    returns = hints.get("return")
    if output_schema is None and _is_model(returns):
        output_schema = returns.model_json_schema()
    description = marks.get("description") or inspect.getdoc(function) or ""
    spec = {"name": name, "description": description, "inputSchema": schema}
    for key, value in (("title", marks.get("title")), ("annotations", marks.get("annotations"))):
        if value is not None:
            spec[key] = value
    if output_schema is not None:
        spec["outputSchema"] = output_schema

    def keywords(arguments: dict) -> dict:
        if model is None:
            return arguments
        try:
            parsed = model.model_validate(arguments)
        except pydantic.ValidationError as refused:
            raise ToolError(f"invalid arguments for `{name}`: {refused}") from None
        return {p.name: getattr(parsed, p.name) for p in parameters}

    if inspect.iscoroutinefunction(function):

        async def invoke(arguments: dict, meta: Optional[dict]) -> dict:
            return _result(await function(**keywords(arguments)))

    else:

        def invoke(arguments: dict, meta: Optional[dict]) -> dict:
            return _result(function(**keywords(arguments)))

    return spec, invoke


def offered(registry: Any, names: Optional[Iterable[str]] = None) -> Iterator[tuple]:
    """What an adapter offers a framework: each tool of `registry` (all,
    or those `names` lists) with its shape as model APIs take it, the
    library's own (`name`, `description`: the description, else a title;
    `input_schema`)."""
    chosen = None if names is None else set(names)
    for info in registry.tools():
        if chosen is None or info.name in chosen:
            yield info, info.anthropic()
