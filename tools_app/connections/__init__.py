"""A member's connections: Toolhub signing in to upstream servers as the tenant or as each member.

The OAuth client (connect link, the browser round trip, stored grants, Toolhub's own client identity) and each
member's personal keys for tools that declare them, with their pages at `/connections/`. The other direction,
Toolhub signing *clients* in to its gateway (`/oauth/`, `/.well-known/`), is `agents_app.gateway.oauth`.

- `paths`: every URL path of this package, the ones upstream servers registered included.
- `client`: Toolhub as an OAuth client upstream: its redirect URI, its metadata document, its registrations.
- `oauth_flow`: connect link → start → callback → a stored grant.
- `grants`: ending stored grants (disconnect, a leaver), revoked upstream.
- `keys`: a member's own values for the keys a tool declares per user.
- `views` (the member page), `oauth_views` (the flow's browser pages), `urls`.

The token a call presents (refreshed, serialized) is a runtime input: `tools_app.wiring.tokens`. What a tool's
config says about connecting (OAuth? per user? which keys?) is `tools_app.configs.auth`.
Nothing is re-exported here: import the module that does the job.
"""
