"""The inventory demo MCP server: `get_inventory(sku)` over stdio, streamable HTTP or SSE."""

from __future__ import annotations

import argparse

from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

STOCK = {"DEMO-001": 12, "DEMO-002": 0}

server = MCPServer("inventory-demo", version="1.2.3")


class Inventory(BaseModel):
    sku: str
    quantity: int
    found: bool


@server.tool(description="Stock on hand for a SKU (try DEMO-001 or DEMO-002).")
def get_inventory(sku: str) -> Inventory:
    if sku in STOCK:
        return Inventory(sku=sku, quantity=STOCK[sku], found=True)
    return Inventory(sku=sku, quantity=0, found=False)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--transport", default="stdio", choices=["stdio", "streamable-http", "sse"])
    parser.add_argument("--port", type=int, default=8765)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.transport == "stdio":
        server.run("stdio")
        return
    import uvicorn

    app = server.sse_app() if args.transport == "sse" else server.streamable_http_app()
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
