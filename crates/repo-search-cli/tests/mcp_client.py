"""A real MCP client (the official Python SDK, mcp==2.3.0) driving `repo-search mcp` over stdio.

Usage: python mcp_client.py REPO_SEARCH_BINARY WORKTREE
Prints one JSON object describing what the server answered; the Rust test asserts on it.
"""
import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


def error_of(res):
    """An error result's `{code, message}`: the JSON of its text content. Errors carry no
    structured content, which a client would validate against the tool's output schema."""
    return json.loads(res.content[0].text) if res.is_error and res.content else None


async def main() -> None:
    exe, root = sys.argv[1], sys.argv[2]
    params = StdioServerParameters(command=exe, args=["mcp", "--root", root])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            listed = await session.list_tools()
            out = {
                "server": init.server_info.name,
                "tools": [
                    {"name": t.name, "modes": t.input_schema["properties"]["mode"]["enum"],
                     "additionalProperties": t.input_schema.get("additionalProperties"),
                     "options": sorted(t.input_schema["properties"].keys()),
                     "title": t.title,
                     "annotations": t.annotations.model_dump(by_alias=True, exclude_none=True)
                     if t.annotations else None,
                     "outputSchema": t.output_schema is not None}
                    for t in listed.tools
                ],
            }
            for mode in ["literal", "indexed_literal"]:
                res = await session.call_tool("repo_search", {"query": "needle_for_mcp", "mode": mode})
                out[mode] = {
                    "isError": res.is_error,
                    "structured": res.structured_content,
                    "text": res.content[0].text if res.content else None,
                }
            bad = await session.call_tool("repo_search", {"query": "needle_for_mcp", "path": "../escape"})
            out["error"] = {"isError": bad.is_error, "structured": bad.structured_content,
                            "error": error_of(bad)}
            # Served on the built-in static model; the SDK holds the answer to the output schema.
            semantic = await session.call_tool("repo_search", {"query": "a function named needle", "mode": "semantic"})
            out["semantic"] = {"isError": semantic.is_error, "structured": semantic.structured_content}
            unknown = await session.call_tool("repo_search", {"query": "needle_for_mcp", "mode": "fuzzy"})
            out["unknown_mode"] = {"isError": unknown.is_error, "structured": unknown.structured_content,
                                   "error": error_of(unknown)}
            # The grep options. The SDK validates every non-error structured result against the
            # tool's outputSchema, so these calls also prove the answers conform to it.
            grep = await session.call_tool("repo_search", {
                "query": "needle_for_[a-z]+\\(", "regex": True, "mode": "literal",
                "glob": ["*.rs"], "context_after": 1})
            out["grep"] = {"isError": grep.is_error, "structured": grep.structured_content}
            pages = []
            args = {"query": "needle_for_mcp", "mode": "literal", "max_results": 1}
            while True:
                page = await session.call_tool("repo_search", args)
                pages.append(page.structured_content)
                if page.is_error or "next_offset" not in page.structured_content:
                    break
                args = dict(args, offset=page.structured_content["next_offset"],
                            page_token=page.structured_content["page_token"])
            out["pages"] = pages
            bad_regex = await session.call_tool("repo_search", {"query": "fn (", "regex": True})
            out["bad_regex"] = {"isError": bad_regex.is_error, "structured": bad_regex.structured_content,
                                "error": error_of(bad_regex)}
            print(json.dumps(out))


asyncio.run(main())
