"""The one tool layer: what a tool is and how it runs (tool.py), the gateway's own tools
(builtin.py), the tools of the operator's MCP servers (remote.py, over mcp_client.py), and what
an agent request offers and runs (toolbox.py). The MCP server endpoint (native/mcp_server.py)
serves builtin.py's tools through tool.py too."""
