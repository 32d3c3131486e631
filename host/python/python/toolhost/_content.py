"""The content items of a call's result, as typed objects."""

from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass(frozen=True)
class TextContent:
    """A text item."""

    text: str
    annotations: Optional[dict] = None
    meta: Optional[dict] = None
    type: str = field(default="text", init=False)


@dataclass(frozen=True)
class ImageContent:
    """An image: base64 `data` of type `mime_type`."""

    data: str
    mime_type: str
    annotations: Optional[dict] = None
    meta: Optional[dict] = None
    type: str = field(default="image", init=False)


@dataclass(frozen=True)
class AudioContent:
    """Audio: base64 `data` of type `mime_type`."""

    data: str
    mime_type: str
    annotations: Optional[dict] = None
    meta: Optional[dict] = None
    type: str = field(default="audio", init=False)


@dataclass(frozen=True)
class ResourceLink:
    """A link to a resource the client may read (`uri`, `name`, ...)."""

    uri: str
    name: str
    title: Optional[str] = None
    description: Optional[str] = None
    mime_type: Optional[str] = None
    size: Optional[int] = None
    annotations: Optional[dict] = None
    meta: Optional[dict] = None
    type: str = field(default="resource_link", init=False)


@dataclass(frozen=True)
class EmbeddedResource:
    """A resource carried in the result: `resource` has `uri` and `text`
    or base64 `blob`."""

    resource: dict
    annotations: Optional[dict] = None
    meta: Optional[dict] = None
    type: str = field(default="resource", init=False)


def content_item(item: dict) -> Any:
    """The typed object of an MCP content item (a dict)."""
    kind = item.get("type")
    common = {"annotations": item.get("annotations"), "meta": item.get("_meta")}
    if kind == "text":
        return TextContent(item["text"], **common)
    if kind == "image":
        return ImageContent(item["data"], item["mimeType"], **common)
    if kind == "audio":
        return AudioContent(item["data"], item["mimeType"], **common)
    if kind == "resource_link":
        return ResourceLink(
            item["uri"],
            item["name"],
            title=item.get("title"),
            description=item.get("description"),
            mime_type=item.get("mimeType"),
            size=item.get("size"),
            **common,
        )
    return EmbeddedResource(item["resource"], **common)
