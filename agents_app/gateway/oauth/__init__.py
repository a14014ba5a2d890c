"""The gateway as an OAuth 2.1 protected resource, with Toolhub as its authorization server (on django-oauth-toolkit).

The protected resource's side sits below this package, in the gateway: `agents_app.gateway.resource` names each
agent's protected resource (Django-free) and `agents_app.gateway.tokens` is the resource server's check of an
access token, so the gateway's principal never imports the authorization server. Here: `metadata` serves RFC 9728
and RFC 8414; `server` and `validator` tighten django-oauth-toolkit (S256 only, one agent per grant);
`registration` is RFC 7591 for public clients and `client_documents` their metadata documents (https client ids);
`consent` is the page after sign-in; `authorizations` lists and revokes what members granted (the agent's admin
page; `mine` a member's own page); `signals` keeps grants in step with what they rest on; `housekeeping` prunes
abandoned clients; `urls` mounts it all.
"""
