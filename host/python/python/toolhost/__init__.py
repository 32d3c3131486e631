"""toolhost: WebAssembly tools for AI agents, loaded, validated and sandboxed
in process.

    >>> import toolhost
    >>> calculator = toolhost.Plugin.load("target/plugins/calculator.wasm", timeout=5)
    >>> calculator.call_sync("add", {"a": 2, "b": 3})["content"][0]["text"]
    '5'

A plugin is granted nothing it is not given: paths, hosts, config, memory
and time come from `Plugin.load`'s arguments. Every call's arguments are
checked against the tool's input schema before the plugin runs, and its
result against the output schema after.
"""

from typing import Any, Mapping, Optional, Sequence

from . import _toolhost
from ._toolhost import (
    CallTimeoutError,
    InvalidArgumentsError,
    LoadError,
    PluginFaultError,
    ToolhostError,
    UnknownToolError,
    __version__,
)


def _arguments(arguments: Optional[Mapping[str, Any]]) -> Optional[dict]:
    if arguments is None:
        return None
    if not isinstance(arguments, Mapping):
        raise TypeError(f"arguments must be a mapping, not {type(arguments).__name__}")
    return dict(arguments)


class Plugin:
    """A loaded plugin: its tools, and calls to them."""

    __slots__ = ("_native",)

    def __init__(self, native: "_toolhost.Plugin") -> None:
        self._native = native

    @classmethod
    def load(
        cls,
        path: str,
        *,
        timeout: Optional[float] = None,
        memory_mb: Optional[int] = None,
        allow_hosts: Sequence[str] = (),
        allow_paths: Sequence[str] = (),
        config: Optional[Mapping[str, str]] = None,
    ) -> "Plugin":
        """Load the plugin at `path`, granting it only what the arguments say:
        `timeout` seconds per call, `memory_mb` of memory, the hosts of
        `allow_hosts` (`api.example.com`, `*.example.com:443`), the
        directories of `allow_paths` (`HOST[:GUEST][:ro|rw]`), `config`."""
        native = _toolhost.Plugin.load(
            str(path),
            timeout=timeout,
            memory_mb=memory_mb,
            allow_hosts=list(allow_hosts),
            allow_paths=list(allow_paths),
            config=dict(config) if config is not None else None,
        )
        return cls(native)

    @property
    def name(self) -> str:
        """The plugin's name."""
        return self._native.name

    def tools(self) -> list:
        """Its tools, each a dict as MCP's `Tool`."""
        return self._native.tools()

    def call_sync(self, name: str, arguments: Optional[Mapping[str, Any]] = None) -> dict:
        """Call tool `name`, blocking this thread (not the interpreter): the
        result, a dict as MCP's `CallToolResult`."""
        return self._native.call_sync(name, _arguments(arguments))

    async def call(self, name: str, arguments: Optional[Mapping[str, Any]] = None) -> dict:
        """Call tool `name`; cancelling the awaiting task stops the call."""
        return await self._native.call(name, _arguments(arguments))

    def pool_stats(self) -> dict:
        """Its instances: `size` (at most at once), `idle`, `busy` (running a
        call now), `idle_memory_bytes`."""
        return self._native.pool_stats()

    def __repr__(self) -> str:
        return repr(self._native)


__all__ = [
    "CallTimeoutError",
    "InvalidArgumentsError",
    "LoadError",
    "Plugin",
    "PluginFaultError",
    "ToolhostError",
    "UnknownToolError",
    "__version__",
]
