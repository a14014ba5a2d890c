"""Settings and rows turned into the Django-free runtime's inputs, one module per job.

- `http`: the outbound guard's policy and the pooled guarded HTTP client.
- `workspaces`: each tenant's workspace folder, made once per process.
- `sql`: the SQL built-ins' database URL and tables.
- `specs`: a tool row as the runtime's spec (MCP server, HTTP), the sandbox policies, a built-in's context.
- `pool`: this process's MCP session pool behind the `Pool` protocol (in-process or through runners).
- `tokens`: the access token an OAuth tool's REMOTE spec carries, refreshed; why a call must be authorized first.

Nothing is re-exported here: import the module that does the job.
"""
