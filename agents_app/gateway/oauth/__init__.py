"""The gateway as an OAuth 2.1 protected resource, with Toolhub as its authorization server (on django-oauth-toolkit).

`resource` names each agent's protected resource (Django-free); `metadata` serves RFC 9728 and RFC 8414;
`server` and `validator` tighten django-oauth-toolkit (S256 only, one agent per grant); `registration` is RFC 7591
for public clients and `client_documents` their metadata documents (https client ids); `consent` is the page after
sign-in; `tokens` the resource server's check at the gateway; `authorizations` lists and revokes what members
granted (the agent's admin page; `mine` a member's own page); `signals` keeps grants in step with what they rest
on; `housekeeping` prunes abandoned clients; `urls` mounts it all.
"""
