"""toolhost's tools as LangChain tools (`pip install toolhost[langchain]`):
`BaseTool`s for LangChain and LangGraph agents, invoked sync or async.

    from toolhost.langchain import tools

    agent = create_agent(model, tools=tools(registry))

Each tool takes its JSON Schema as `args_schema`; toolhost checks the
arguments, runs the tool and checks the result. What goes wrong is a
`ToolException` in toolhost's words (refused arguments with each JSON
pointer, a tool error, a timeout, a fault, a denial), which the tool turns
into an error `ToolMessage` the model reads (`handle_tool_error`). The
result's text is the message's content and the `CallResult` its artifact.
LangChain has no approval step of its own for tools: the registry's
`approve` hook decides.
"""

from typing import Any, Optional

from langchain_core.tools import BaseTool, ToolException

from . import CallResult, Registry, ToolhostError
from ._tools import offered


class ToolhostTool(BaseTool):
    """One tool of a toolhost registry."""

    registry: Any
    handle_tool_error: bool = True
    response_format: str = "content_and_artifact"

    def _run(self, **arguments: Any) -> tuple:
        try:
            return _answer(self.registry.call_sync(self.name, arguments))
        except ToolhostError as failed:
            raise ToolException(failed.model_text) from None

    async def _arun(self, **arguments: Any) -> tuple:
        try:
            return _answer(await self.registry.call(self.name, arguments))
        except ToolhostError as failed:
            raise ToolException(failed.model_text) from None


def _answer(result: CallResult) -> tuple:
    if result.is_error:
        raise ToolException(result.text)
    return result.text, result


def tools(registry: Registry, *, names: Optional[list] = None) -> list:
    """The tools of `registry` (all, or those `names` lists) as LangChain
    `BaseTool`s."""
    return [
        ToolhostTool(name=info.name, description=shape["description"], args_schema=shape["input_schema"], registry=registry)
        for info, shape in offered(registry, names)
    ]
