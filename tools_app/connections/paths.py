"""The URL paths of a member's connections (site-absolute; `core.links.public_base` makes them absolute links).

`/connections/` is this package's home. Three paths stay under `/oauth/` because others know them: the connect
link (`/oauth/start/<flow>/`, which the API contract hands out as `authorize_url`), Toolhub's redirect URI (registered at each server, by RFC 7591 registration or by an admin who configured a
`client_id`) and its Client ID Metadata Document (whose URL *is* the client id). Changing either would break every
grant flow at a server that registered it, so they are kept as they are: the callback forwards permanently to
`CALLBACK_PATH`, the document is served where it was.
"""

from __future__ import annotations

from urllib.parse import urlencode

HOME_PATH = "/connections/"  # the member's connections page
START_PATH = "/oauth/start/{flow}/"  # the connect link a member opens (one user, one browser): the API contract's
CALLBACK_PATH = "/connections/oauth/callback/"  # where the registered redirect URI forwards to

REGISTERED_REDIRECT_PATH = "/oauth/callback/"  # the redirect URI upstream servers registered: never changes
CLIENT_METADATA_PATH = "/oauth/client-metadata.json"  # its URL is Toolhub's client id at CIMD servers: never changes

MOVED_HOME_PATH = "/accounts/connections/"  # the member page's old home: forwards to HOME_PATH


def absolute(base_url: str, path: str) -> str:
    """`path` under the public base URL (`core.links.public_base`)."""
    return base_url.rstrip("/") + path


def home_url(base_url: str, tenant_slug: str) -> str:
    """The member's connections page for one tenant: where a call that needs their keys or account sends them."""
    return absolute(base_url, HOME_PATH) + "?" + urlencode({"tenant": tenant_slug})


def start_url(base_url: str, flow_id: object) -> str:
    return absolute(base_url, START_PATH.format(flow=flow_id))


def redirect_uri(base_url: str) -> str:
    """The redirect URI Toolhub presents upstream (the registered one)."""
    return absolute(base_url, REGISTERED_REDIRECT_PATH)
