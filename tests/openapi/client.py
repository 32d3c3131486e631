"""Drive the tool-set service through a client generated from its own
OpenAPI document (openapi-python-client): create an http tool set (twice,
with one Idempotency-Key), add a tool to it, and read its tools and events.

Usage: client.py BASE_URL TOKEN CLIENT_DIR. Prints one JSON object.
"""

import json
import sys

base, token, generated = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, generated)

from toolhost_tool_set_service_client import AuthenticatedClient  # noqa: E402
from toolhost_tool_set_service_client.api.events import list_tool_set_events  # noqa: E402
from toolhost_tool_set_service_client.api.tool_sets import create_tool_set, get_tool_set  # noqa: E402
from toolhost_tool_set_service_client.api.tools import create_tool, list_tools  # noqa: E402
from toolhost_tool_set_service_client.models import Error, Tool, ToolSet  # noqa: E402

API = sys.argv[4]

with AuthenticatedClient(base_url=base, token=token, raise_on_unexpected_status=True) as client:
    body = ToolSet.from_dict(
        {
            "metadata": {"name": "Weather API", "labels": {"team": "forecasts"}},
            "spec": {"description": "Forecasts", "adapter": {"http": {"baseUrl": API}}},
        }
    )
    first = create_tool_set.sync_detailed(client=client, body=body, idempotency_key="generated-client-1")
    again = create_tool_set.sync_detailed(client=client, body=body, idempotency_key="generated-client-1")
    assert isinstance(first.parsed, ToolSet), first.content
    tool_set = first.parsed
    tool = Tool.from_dict(
        {
            "metadata": {"name": "forecast"},
            "spec": {
                "description": "The forecast for a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                "config": {"http": {"requestMethod": "GET", "path": "/forecast", "query": "city={city}"}},
            },
        }
    )
    made = create_tool.sync(tool_set.metadata.id, client=client, body=tool)
    assert isinstance(made, Tool), made
    tools = list_tools.sync(tool_set.metadata.id, client=client)
    events = list_tool_set_events.sync(tool_set.metadata.id, client=client)
    read = get_tool_set.sync(tool_set.metadata.id, client=client)
    # A header that is the transport's own: refused, with where.
    hostile = Tool.from_dict(
        {
            "metadata": {"name": "elsewhere"},
            "spec": {
                "description": "Another virtual host",
                "parameters": {"type": "object"},
                "config": {"http": {"requestMethod": "GET", "headers": {"Host": "internal.example"}}},
            },
        }
    )
    refused = create_tool.sync(tool_set.metadata.id, client=client, body=hostile)
    print(
        json.dumps(
            {
                "toolSet": tool_set.metadata.id,
                "statuses": [first.status_code.value, again.status_code.value],
                "replayed": again.headers.get("idempotent-replayed"),
                "sameId": again.parsed.metadata.id == tool_set.metadata.id,
                "mcpName": read.info.mcp_name,
                "tool": made.info.mcp_name,
                "tools": [t.metadata.name for t in tools.tools],
                "nextPageToken": tools.next_page_token,
                "events": [e.event.type_.value for e in events.events],
                "refused": {
                    "error": isinstance(refused, Error),
                    "pointer": refused.error.details[0].pointer if isinstance(refused, Error) else None,
                },
            }
        )
    )
