// The official TypeScript MCP SDK's client against this service, for tests/mcp/test_mcp_interop.py.
//   node mcp-interop.mjs http URL TOKEN SHIPMENT_ID      streamable HTTP at URL (.../mcp) with the token
//   node mcp-interop.mjs stdio FLASK SHIPMENT_ID          `FLASK --app app mcp` (SHIPTRACK_TOKEN from the environment)
// Prints one JSON object: the negotiated version, the tool names, a tool call, a resource read, a refusal.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [kind, ...rest] = process.argv.slice(2);
let transport, shipment;
if (kind === "http") {
  const [url, token, id] = rest;
  shipment = id;
  transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
} else {
  const [flask, id] = rest;
  shipment = id;
  transport = new StdioClientTransport({ command: flask, args: ["--app", "app", "mcp"], env: process.env, stderr: "ignore" });
}
const client = new Client({ name: "shiptrack-interop", version: "1.0.0" });
await client.connect(transport);
const tools = await client.listTools();
const call = await client.callTool({ name: "get_shipment", arguments: { shipment_id: shipment } });
const full = await client.callTool({ name: "get_shipment", arguments: { shipment_id: shipment, full: true } });
const resource = await client.readResource({ uri: `shipment://${shipment}` });
const missing = await client.callTool({ name: "get_shipment", arguments: { shipment_id: "shp_999999999" } });
let refused = null;
try {
  await client.readResource({ uri: "shipment://shp_999999999" });
} catch (error) {
  refused = { code: error.code, message: error.message };
}
console.log(JSON.stringify({
  protocolVersion: transport.protocolVersion ?? null,
  server: client.getServerVersion(),
  tools: tools.tools.map((tool) => ({ name: tool.name, required: tool.inputSchema.required ?? [] })),
  call, full, resource, missing, refused,
}));
await client.close();
