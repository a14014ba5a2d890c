"""The MCP gateway: every agent served as an MCP server (streamable HTTP and SSE) and its OAuth 2.1 authorization server."""
