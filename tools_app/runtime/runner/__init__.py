"""The runner tier: LOCAL MCP servers live in runner processes, one server key on exactly one runner per deployment.

`app` is the runner's side (an authenticated HTTP endpoint hosting a session pool), `client` the web and worker
side (`RunnerPool`, the pool facade that sends LOCAL work to the key's runner), `placement` who owns a key (runner
heartbeats in Redis, rendezvous hashing), `wire` the JSON both sides speak.
"""
