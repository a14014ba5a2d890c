"""Client ID Metadata Documents: the mcp SDK identifies itself by an https URL instead of registering; Toolhub
fetches the document through its outbound guard, and the document's redirect URIs obey the registration rules."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from oauth2_provider.models import AccessToken, Application

from core import outbound
from tests import loopback
from tests.agents_app.gateway.oauth_support import (
    REDIRECT_URI,
    Browser,
    MemoryStorage,
    Pkce,
    authorize_url,
    consent_as,
    provider,
)
from tests.fixtures.mcp_servers import free_port, wait_listening
from tests.waiting import scaled
from tools_app.models import ToolCall

pytestmark = pytest.mark.django_db(transaction=True)

DOC_NAME = "Metadata Document Client"


def _certificate(folder: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@pytest.fixture
def documents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """An https server on 127.0.0.1 answering the documents put in the returned dict (by path); Toolhub's outbound
    guard trusts its certificate for the test."""
    cert, key = _certificate(tmp_path)
    served: dict[str, Any] = {}

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = json.dumps(served.get(scope["path"], {})).encode()
        status = 200 if scope["path"] in served else 404
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           ssl_certfile=str(cert), ssl_keyfile=str(key), lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_listening(port)
    trusted = ssl.create_default_context(cafile=str(cert))
    monkeypatch.setattr(outbound, "ssl_context", lambda: trusted)
    served["base"] = f"https://127.0.0.1:{port}"
    try:
        yield served
    finally:
        server.should_exit = True
        thread.join(10)


def _document(url: str, redirect_uris: list[str]) -> dict[str, Any]:
    return {"client_id": url, "client_name": DOC_NAME, "redirect_uris": redirect_uris,
            "grant_types": ["authorization_code", "refresh_token"], "response_types": ["code"],
            "token_endpoint_auth_method": "none"}


def test_the_sdk_signs_in_with_a_client_id_metadata_document(served: Any, setup: Any,
                                                               documents: dict[str, Any]) -> None:
    doc_url = f"{documents['base']}/clients/desktop.json"
    documents["/clients/desktop.json"] = _document(doc_url, [REDIRECT_URI])
    url = served.endpoint("acme", setup.agent_id)
    storage, browser = MemoryStorage(), Browser(setup.api.user.username)

    async def scenario() -> Any:
        auth = provider(url, browser, storage, client_metadata_url=doc_url)
        try:
            async with loopback.async_client(auth=auth, timeout=scaled(30)) as http:
                async with streamable_http_client(url, http_client=http) as (read, write):
                    async with ClientSession(read, write) as session:
                        await session.initialize()
                        return await session.call_tool("inventory__get_inventory", {"sku": "DEMO-001"})
        finally:
            await browser.close()

    result = asyncio.run(scenario())
    assert not result.is_error
    app = Application.objects.get(client_id=doc_url)
    assert (app.name, app.client_type) == (DOC_NAME, "public")
    assert AccessToken.objects.filter(application=app, user=setup.api.user).exists()
    assert ToolCall.objects.get(function="get_inventory").client == DOC_NAME
    assert DOC_NAME in browser.consent_pages[0] and doc_url in browser.consent_pages[0]


def test_a_document_with_a_redirect_uri_toolhub_would_not_register_is_an_unknown_client(
    served: Any, setup: Any, documents: dict[str, Any]
) -> None:
    doc_url = f"{documents['base']}/clients/web.json"
    documents["/clients/web.json"] = _document(doc_url, ["http://evil.example/cb"])
    url = authorize_url(served.base_url, doc_url, served.endpoint("acme", setup.agent_id), Pkce.make(),
                        redirect_uri="http://evil.example/cb")
    resp, browser = consent_as(url, setup.api.user.username)
    assert resp.status_code == 400 and "location" not in resp.headers
    assert not browser.consent_pages
    assert not Application.objects.filter(client_id=doc_url).exists()
