"""toolhost's tools as a PydanticAI toolset (`pip install toolhost[pydantic-ai]`).

    from pydantic_ai import Agent
    from toolhost.pydantic_ai import ToolhostToolset

    agent = Agent("openai:gpt-5", toolsets=[ToolhostToolset(registry)])

Every tool the registry shows is offered to the model under its namespaced
name with its input schema; toolhost checks the arguments, runs the tool
and checks its result, as for any caller. What goes wrong reaches the
model the way PydanticAI expects:

- arguments the schema refuses, or an unknown tool: `ModelRetry`, with
  toolhost's words (every problem and its JSON pointer), so the model can
  correct the call;
- a tool error result, a timeout, a plugin fault, a denial: `ToolFailed`,
  a failed tool result the model reads and adapts to;
- a tool that requires approval: PydanticAI's own human-in-the-loop
  approval (`ApprovalRequired`, answered with `DeferredToolResults`), unless
  `approvals="registry"` leaves the decision to the registry's `approve`
  hook.

Cancelling the run's task cancels the tool call and stops the guest.
"""

from typing import Any, Literal, Optional

import pydantic_core
from pydantic_ai import ApprovalRequired, ModelRetry, RunContext, ToolFailed
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from . import InvalidArgumentsError, Registry, ToolhostError, UnknownToolError
from ._tools import offered

# The registry checks arguments against the tool's own schema; PydanticAI
# only needs to see an object.
_ANY_OBJECT = pydantic_core.SchemaValidator(
    pydantic_core.core_schema.dict_schema(
        pydantic_core.core_schema.str_schema(), pydantic_core.core_schema.any_schema()
    )
)


class ToolhostToolset(AbstractToolset):
    """The tools of `registry` (all of them, or those `names` lists) for a
    PydanticAI agent. `approvals` is `"framework"` (PydanticAI asks, as for
    its own tools) or `"registry"` (the registry's `approve` hook decides).
    `max_retries` bounds the model's corrections of refused arguments (the
    run's default when `None`)."""

    def __init__(
        self,
        registry: Registry,
        *,
        names: Optional[list] = None,
        approvals: Literal["framework", "registry"] = "framework",
        max_retries: Optional[int] = None,
        id: Optional[str] = None,
    ) -> None:
        if approvals not in ("framework", "registry"):
            raise ValueError("approvals is 'framework' or 'registry'")
        self._registry = registry
        self._names = names
        self._approvals = approvals
        self._max_retries = max_retries
        self._id = id

    @property
    def id(self) -> Optional[str]:
        return self._id

    @property
    def label(self) -> str:
        return f"toolhost ({self._id})" if self._id else "toolhost"

    async def get_tools(self, ctx: RunContext) -> dict:
        tools = {}
        for info, shape in offered(self._registry, self._names):
            definition = ToolDefinition(
                name=info.name,
                description=shape["description"],
                parameters_json_schema=shape["input_schema"],
                metadata={"annotations": info.annotations, "requires_approval": info.requires_approval},
            )
            tools[info.name] = ToolsetTool(
                toolset=self,
                tool_def=definition,
                max_retries=self._max_retries if self._max_retries is not None else ctx.max_retries,
                args_validator=_ANY_OBJECT,
            )
        return tools

    async def call_tool(self, name: str, tool_args: dict, ctx: RunContext, tool: ToolsetTool) -> Any:
        approved = False
        if self._approvals == "framework" and tool.tool_def.metadata.get("requires_approval"):
            if not ctx.tool_call_approved:
                raise ApprovalRequired()
            approved = True
        try:
            result = await self._registry.call(name, tool_args, approved=approved)
        except (InvalidArgumentsError, UnknownToolError) as refused:
            raise ModelRetry(refused.model_text) from None
        except ToolhostError as failed:
            raise ToolFailed(failed.model_text) from None
        if result.is_error:
            raise ToolFailed(result.text)
        if result.structured_content is not None:
            return result.structured_content
        return result.text
