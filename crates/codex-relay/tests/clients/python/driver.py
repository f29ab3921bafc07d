"""A real MCP client (the official Python SDK, `mcp`) that the Rust scenario tests drive: one
JSON command per line on stdin, one JSON answer per line on stdout. It connects over stdio or
streamable HTTP (protocol negotiated as the SDK does by default, or pinned with `mode`), calls
tools, and answers elicitation forms by a policy the test sets."""

import asyncio
import contextlib
import json
import sys
import time
import traceback

from mcp import Client, StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

elicitations = []
policy = {"acceptWhen": None, "content": {}}


async def on_elicit(context, params):
    message = params.message
    elicitations.append({"message": message, "schema": getattr(params, "requested_schema", None)})
    if policy["acceptWhen"] is not None and policy["acceptWhen"] in message:
        return types.ElicitResult(action="accept", content=policy["content"])
    return types.ElicitResult(action="decline")


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True) if model is not None else None


async def main():
    stack = contextlib.AsyncExitStack()
    client = None
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def handle(cmd):
        nonlocal client
        op = cmd["op"]
        if op == "connect":
            if cmd["transport"] == "stdio":
                server = StdioServerParameters(command=cmd["command"], args=cmd["args"], env=cmd.get("env"))
            elif cmd.get("headers"):
                # The relay's token: the SDK takes headers through its HTTP client.
                http = create_mcp_http_client(headers=cmd["headers"])
                await stack.enter_async_context(http)
                server = streamable_http_client(cmd["url"], http_client=http)
            else:
                server = cmd["url"]
            client = Client(server, elicitation_callback=on_elicit, mode=cmd.get("mode", "auto"), read_timeout_seconds=120)
            await stack.enter_async_context(client)
            tools = await client.list_tools()
            return {"protocolVersion": client.protocol_version, "tools": [t.name for t in tools.tools]}
        if op == "policy":
            policy["acceptWhen"] = cmd["acceptWhen"]
            policy["content"] = cmd["content"]
            return {}
        if op == "elicitations":
            return {"elicitations": elicitations}
        if op == "call":
            progress = 0

            async def on_progress(value, total, message):
                nonlocal progress
                progress += 1

            started = time.monotonic()
            try:
                result = await client.call_tool(cmd["tool"], cmd["args"], progress_callback=on_progress)
            except Exception as e:  # a protocol error, shown to the test as such
                return {"thrown": repr(e), "progress": progress, "ms": int((time.monotonic() - started) * 1000)}
            text = "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")
            return {
                "isError": bool(result.is_error),
                "structured": result.structured_content,
                "text": text,
                "progress": progress,
                "ms": int((time.monotonic() - started) * 1000),
            }
        if op == "close":
            await stack.aclose()
            return {}
        raise ValueError(f"unknown op {op}")

    while True:
        line = await reader.readline()
        if not line:
            break
        if not line.strip():
            continue
        try:
            answer = {"ok": True, "value": await handle(json.loads(line))}
        except Exception:
            answer = {"ok": False, "error": traceback.format_exc()}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    with contextlib.suppress(Exception):
        await stack.aclose()


asyncio.run(main())
