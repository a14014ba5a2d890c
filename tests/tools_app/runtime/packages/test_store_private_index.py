"""A PyPI install from a private index whose URL carries its credentials (`https://user:token@host/simple`).

pip's resolve report strips the user and password from each file's URL, so the install step cannot take the files
by those URLs (its fast path, a find-links page of them): it must go through the index as the resolve did. A real
index on 127.0.0.1 that answers 401 without the credentials, and a wheel built here."""

from __future__ import annotations

import base64
import hashlib
import io
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tools_app.runtime.packages.refs import PackageRef
from tools_app.runtime.packages.registry import Registries
from tools_app.runtime.packages.store import install

NAME, VERSION = "toolhub-auth-probe", "1.0"
WHEEL_NAME = f"toolhub_auth_probe-{VERSION}-py3-none-any.whl"
USER, PASSWORD = "reader", "s3cret-token"


def _wheel() -> bytes:
    dist = f"toolhub_auth_probe-{VERSION}.dist-info"
    files = {
        "toolhub_auth_probe/__init__.py": b"ANSWER = 42\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n".encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: toolhub-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
        for path, data in files.items()) + f"{dist}/RECORD,,\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path, data in {**files, f"{dist}/RECORD": record.encode()}.items():
            archive.writestr(path, data)
    return buffer.getvalue()


@pytest.fixture
def private_index() -> Iterator[tuple[str, list[str]]]:
    """The index's URL with its credentials, and the paths it served to a request that carried them."""
    wheel = _wheel()
    digest = hashlib.sha256(wheel).hexdigest()
    expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    served: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.headers.get("Authorization") != expected:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="private"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if self.path.rstrip("/") == f"/simple/{NAME}":
                body = f'<html><body><a href="/files/{WHEEL_NAME}#sha256={digest}">{WHEEL_NAME}</a></body></html>'
                payload, kind = body.encode(), "text/html"
            elif self.path == f"/files/{WHEEL_NAME}":
                payload, kind = wheel, "application/octet-stream"
            else:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            served.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://{USER}:{PASSWORD}@127.0.0.1:{server.server_address[1]}/simple/", served
    finally:
        server.shutdown()
        server.server_close()


def test_an_index_with_credentials_in_its_url_installs(tmp_path: Path, private_index: tuple[str, list[str]]) -> None:
    url, served = private_index
    ref = PackageRef(manager="pypi", name=NAME, spec=f"=={VERSION}", registries=(url,), runner="uvx")
    done = install(ref, VERSION, store=tmp_path / "store", registries=Registries(allowed_hosts=("127.0.0.1",)),
                   timeout_s=120)
    module = next(Path(done.path).glob("lib/python*/site-packages/toolhub_auth_probe/__init__.py"))
    assert module.read_text() == "ANSWER = 42\n"
    assert served.count(f"/files/{WHEEL_NAME}") >= 1  # the wheel came from the index, with the credentials
    assert PASSWORD not in (Path(done.path) / "requirements.txt").read_text()  # no secret kept in the store
