"""For the /api/v1/collections tests: texts to write and search (a PDF and an HTML page made here),
the test world (`world_fixture`, imported as the fixture `world`: an account with a key, a chat
and an embedding model on the reference upstream) and helpers that call the routes."""

from types import SimpleNamespace

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from native import vectors
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for, bearer

BASE = "/api/v1/collections"

VOLCANO = ("Basalt volcanoes erupt when magma rises through the crust. The magma chamber fills, pressure "
           "builds, and lava flows from the vent down the slopes of the volcano.")
BREAD = "Sourdough bread needs flour, water, salt and a lively starter of wild yeast, then a long slow proof."
TRAINS = "The night train to the coast leaves the central station at ten and arrives before dawn."


def make_pdf(lines: list[str]) -> bytes:
    """A minimal valid PDF of one page whose content stream shows `lines` in Helvetica."""
    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    shown = "".join(f"({escape(line)}) Tj T* " for line in lines)
    stream = f"BT /F1 11 Tf 14 TL 50 750 Td {shown}ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


HTML_PAGE = f"""<!doctype html>
<html><head><title>Kitchen notes</title><style>body {{ color: red }} volcano magma</style>
<script>var lava = "magma volcano eruption";</script></head>
<body><nav>Home | About</nav>
<article><h1>Baking</h1><p>{BREAD}</p><p>Bake it hot &amp; covered for the first twenty minutes.</p></article>
</body></html>"""


@pytest.fixture(name="world")
def world_fixture(transactional_db, upstream):
    group = AccountGroupFactory(name="team", api_access=True)
    account = AccountFactory(group=group, email="dev@example.test")
    oa = ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1", read_timeout=2.0)
    ModelFactory(server=oa, name="echo-1", is_default=True)
    ModelFactory(server=oa, name="embed-1", supports_chat=False, supports_embeddings=True)
    vectors.forget()
    yield SimpleNamespace(group=group, account=account, oa=oa, upstream=upstream, headers=bearer(api_key_for(account)))
    vectors.forget()


def create(client, world, name="Notes", **extra):
    r = client.post(BASE, {"name": name, **extra}, content_type="application/json", headers=world.headers)
    assert r.status_code == 201, r.content
    return r.json()


def write_text(client, world, collection_id, name, text, content_type="text/plain", headers=None):
    return client.post(f"{BASE}/{collection_id}/documents", {"name": name, "text": text, "content_type": content_type},
                       content_type="application/json", headers=headers or world.headers)


def upload(client, world, collection_id, filename, data, content_type, headers=None):
    file = SimpleUploadedFile(filename, data, content_type=content_type)
    return client.post(f"{BASE}/{collection_id}/documents", {"file": file}, headers=headers or world.headers)


def first_name(client, world, collection_id, query):
    return search(client, world, collection_id, query).json()["results"][0]["document_name"]


def search(client, world, collection_id, query, k=3, headers=None):
    return client.post(f"{BASE}/{collection_id}/search", {"query": query, "k": k}, content_type="application/json",
                       headers=headers or world.headers)


def assert_collections_error(response, status, code):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"status", "code", "message"}, body
    assert body["status"] == "error" and body["code"] == code
    assert isinstance(body["message"], str) and body["message"]
    return body
