"""toolhost: WebAssembly tools for AI agents, loaded, validated and sandboxed
in process.

    >>> import toolhost
    >>> calculator = toolhost.Plugin.load("target/plugins/calculator.wasm", timeout=5)
    >>> calculator.call_sync("add", {"a": 2, "b": 3}).text
    '5'

A plugin is granted nothing it is not given: paths, hosts, config, memory
and time come from `Plugin.load`'s arguments or the toolsets file. Every
call's arguments are checked against the tool's input schema before the
tool runs, and its result against the output schema after.

`Registry` holds many toolsets under one set of names: Wasm plugins (files,
`https://`, `oci://`), remote MCP servers, and tools written in Python
(`Registry.add_tools`).
"""

from typing import Any, Callable, Iterable, Mapping, Optional, Union

from . import _toolhost
from ._content import AudioContent, EmbeddedResource, ImageContent, ResourceLink, TextContent
from ._toolhost import (
    ApprovalDeniedError,
    CallResult,
    CallTimeoutError,
    InvalidArgumentsError,
    LoadError,
    MissingSecretError,
    OutputTooLargeError,
    PluginFaultError,
    ToolError,
    ToolhostError,
    ToolInfo,
    UnknownToolError,
    __version__,
)
from ._tools import ToolResult, describe, tool


class Plugin(_toolhost.Plugin):
    """A plugin loaded on its own, with the grants its arguments give:
    `Plugin.load(path, timeout=, memory_mb=, allow_hosts=, allow_paths=,
    config=, grant_secrets=, secrets=, max_output_size=, fuel=,
    pool_size=)`. Calls take the same keywords as `Registry`'s."""

    @classmethod
    def load(cls, path: str, **grants: Any) -> "Plugin":
        """Load the plugin at `path`, granting it only what the keywords
        say: `timeout` seconds per call, `memory_mb` of memory, the hosts of
        `allow_hosts` (`api.example.com`, `*.example.com:443`), the
        directories of `allow_paths` (`HOST[:GUEST][:ro|rw]`), `config`
        values, and the secrets `grant_secrets` names, read from `secrets`
        (a mapping, or a callable `name -> str | None`; else the
        environment); `max_output_size`, `fuel` and `pool_size` as the
        CLI's flags."""
        provider = grants.get("secrets")
        if isinstance(provider, Mapping):
            grants["secrets"] = dict(provider).get
        return cls(str(path), **grants)

    async def call(self, name: str, arguments: Optional[dict] = None, **options: Any) -> CallResult:
        """Call tool `name`; cancelling the awaiting task stops the call.
        The keywords are `call_sync`'s."""
        return await self._call(name, arguments, **options)


class Registry(_toolhost.Registry):
    """Toolsets and their tools, under namespaced names (`<toolset>__<tool>`).

    `secrets` is where declared secrets come from: a mapping, or a callable
    `secrets(name) -> str | None` (sync or async); else `secrets_dir`, a
    directory of files named after the secrets; else the environment.
    `approve(tool, arguments) -> bool | str` (sync or async) decides on
    calls of tools that require approval: `True` runs the tool, a string
    denies with that reason; without it, such calls are denied.
    """

    def __new__(
        cls,
        *,
        secrets: Union[Mapping[str, str], Callable[[str], Any], None] = None,
        secrets_dir: Optional[str] = None,
        approve: Optional[Callable[[ToolInfo, dict], Any]] = None,
    ) -> "Registry":
        if isinstance(secrets, Mapping):
            secrets = dict(secrets).get
        return super().__new__(cls, secrets=secrets, secrets_dir=secrets_dir, approve=approve)

    def __init__(self, **_options: Any) -> None:
        pass

    @classmethod
    def from_file(cls, path: str, **options: Any) -> "Registry":
        """A registry with the toolsets file at `path` loaded; a toolset
        that fails to load raises `LoadError` naming it and why."""
        registry = cls(**options)
        report = registry.load(str(path))
        if report["failures"]:
            reasons = "; ".join(f"{f['toolset']}: {f['error']}" for f in report["failures"])
            raise LoadError(f"toolsets of {path} did not load: {reasons}")
        return registry

    async def call(self, name: str, arguments: Optional[dict] = None, **options: Any) -> CallResult:
        """Call the tool `name` (`<toolset>__<tool>`) with `arguments`;
        cancelling the awaiting task stops the call. `options` are
        `call_sync`'s: `timeout` (seconds), `user_id`, `meta`, and the
        caller's hooks `on_log(level, message)`, `on_progress(progress,
        total, message)`, `on_request(method, params)`."""
        return await self._call(name, arguments, **options)

    def add_tools(self, toolset: str, functions: Iterable[Callable]) -> list:
        """Add the Python functions `functions` (sync or async; marked with
        `@toolhost.tool` or not) as the built-in toolset `toolset`: their
        tools are `<toolset>__<name>`, described from their signatures and
        docstrings, called with arguments checked against that schema.
        Replaces a toolset of that id added before. Returns warnings."""
        return self._add_builtin(toolset, [describe(function) for function in functions])


__all__ = [
    "ApprovalDeniedError",
    "AudioContent",
    "CallResult",
    "CallTimeoutError",
    "EmbeddedResource",
    "ImageContent",
    "InvalidArgumentsError",
    "LoadError",
    "MissingSecretError",
    "OutputTooLargeError",
    "Plugin",
    "PluginFaultError",
    "Registry",
    "ResourceLink",
    "TextContent",
    "ToolError",
    "ToolInfo",
    "ToolResult",
    "ToolhostError",
    "UnknownToolError",
    "__version__",
    "tool",
]
