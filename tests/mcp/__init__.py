"""The MCP server (/mcp and `flask mcp`) through the SDK's clients."""
