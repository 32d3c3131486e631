"""toolhost's tools as OpenAI Agents SDK `FunctionTool`s
(`pip install toolhost[openai-agents]`).

    from agents import Agent
    from toolhost.openai_agents import function_tools

    agent = Agent(name="assistant", tools=function_tools(registry))

Each tool keeps its own JSON Schema (`strict_json_schema=False`: toolhost,
not the SDK's strict mode, checks the arguments). What goes wrong is a tool
output the model reads, in toolhost's words: refused arguments with every
problem and its JSON pointer, a tool error, a timeout, a fault, a denial.
A tool that requires approval uses the SDK's own approval (`needs_approval`:
the run is interrupted, and resumes once the item is approved or rejected),
unless `approvals="registry"` leaves it to the registry's `approve` hook.
Cancelling the run's task cancels the tool call and stops the guest.
"""

import json
from typing import Literal, Optional

from agents import FunctionTool, RunContextWrapper

from . import Registry, ToolhostError
from ._tools import offered


def function_tools(
    registry: Registry,
    *,
    names: Optional[list] = None,
    approvals: Literal["framework", "registry"] = "framework",
) -> list:
    """The tools of `registry` (all, or those `names` lists) as
    `FunctionTool`s."""
    if approvals not in ("framework", "registry"):
        raise ValueError("approvals is 'framework' or 'registry'")
    tools = []
    for info, shape in offered(registry, names):
        framework_approval = approvals == "framework" and info.requires_approval
        tools.append(
            FunctionTool(
                name=info.name,
                description=shape["description"],
                params_json_schema=shape["input_schema"],
                on_invoke_tool=_invoker(registry, info.name, framework_approval),
                strict_json_schema=False,
                needs_approval=framework_approval,
            )
        )
    return tools


def _invoker(registry: Registry, name: str, approved: bool):
    # With `needs_approval`, the SDK runs the tool only once approved.
    async def invoke(context: RunContextWrapper, arguments: str) -> str:
        try:
            parsed = json.loads(arguments) if arguments else {}
        except json.JSONDecodeError as bad:
            return f"invalid arguments for `{name}`; the tool did not run: not JSON ({bad})"
        if not isinstance(parsed, dict):
            return f"invalid arguments for `{name}`; the tool did not run: at /: not an object"
        try:
            result = await registry.call(name, parsed, approved=approved)
        except ToolhostError as failed:
            return failed.model_text
        if result.structured_content is not None and not result.is_error:
            return json.dumps(result.structured_content)
        return result.text

    return invoke
