"""Collections on the embedded default, whatever database the suite runs on: a fresh SQLite file
served by its own gateway process, set up with the commands an operator uses (migrate,
createaccount, applyconfig), documents written and searched over HTTP. CI runs the rest of the
suite on PostgreSQL, so this is where SQLite's storage of the vectors is shown there too."""

import os
import subprocess
import sys

import httpx
import pytest

from tests.native.test_collections import HTML_PAGE, TRAINS, VOLCANO, make_pdf
from tests.servers import ROOT, web_process
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

PASSWORD = "embedded-Default-1"


@pytest.fixture
def embedded(tmp_path, upstream, settings):  # noqa: F811
    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'gateway.sqlite3'}",
        "REDIS_URL": "",  # the embedded default: counters in the database cache
        "GATEWAY_VAR_DIR": str(tmp_path),
        "PASSWORD_HASHERS": ",".join(settings.PASSWORD_HASHERS),  # the test run's fast hasher, in every process
        "COLLECTION_CHUNK_CHARS": "200",
        "COLLECTION_CHUNK_OVERLAP": "40",
    }
    config = tmp_path / "gateway.yaml"
    config.write_text(f"""
servers:
  - name: oa
    kind: openai
    base_url: {upstream.url}/v1
    models:
      - name: echo-1
      - name: embed-1
        chat: false
        embeddings: true
default_model: oa/echo-1
""")

    def manage(*args: str, stdin: str | None = None) -> None:
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, input=stdin, text=True,
                              capture_output=True, timeout=120, env={**os.environ, **env})
        assert done.returncode == 0, done.stdout + done.stderr

    manage("migrate", "--noinput")
    manage("createcachetable")
    manage("applyconfig", str(config))
    manage("createaccount", "--email", "reader@example.test", "--name", "Reader", "--group", "readers",
           "--api-access", "--password-stdin", stdin=PASSWORD)
    with web_process(**env) as base:
        yield base


def test_documents_are_written_and_the_right_chunk_is_found_first_on_sqlite(embedded):
    with httpx.Client(base_url=embedded, timeout=30) as http:
        login = http.post("/api/v1/auth/login", json={"email": "reader@example.test", "password": PASSWORD})
        assert login.status_code == 200, login.text
        session = login.json()["data"]["access_token"]
        key = http.post("/api/v1/auth/api-key/generate", json={"password": PASSWORD},
                        headers={"Authorization": f"Bearer {session}"}).json()["data"]["api_key"]
        http.headers["Authorization"] = f"Bearer {key}"

        collection = http.post("/api/v1/collections", json={"name": "Notes"}).json()
        pdf = make_pdf(["Field guide, chapter three.", *VOLCANO.split(". "), TRAINS])
        files = {"geology.pdf": (pdf, "application/pdf"), "kitchen.html": (HTML_PAGE.encode(), "text/html")}
        documents = {}
        for name, (data, content_type) in files.items():
            r = http.post(f"/api/v1/collections/{collection['id']}/documents",
                          files={"file": (name, data, content_type)})
            assert r.status_code == 201, r.text
            documents[name] = r.json()["id"]

        def first_hit(query: str) -> dict:
            r = http.post(f"/api/v1/collections/{collection['id']}/search", json={"query": query, "k": 3})
            assert r.status_code == 200, r.text
            return r.json()["results"][0]

        volcano = first_hit("how does magma erupt from a volcano")
        assert volcano["document_id"] == documents["geology.pdf"] and "magma" in volcano["text"]
        bread = first_hit("bread with flour and wild yeast")
        assert bread["document_id"] == documents["kitchen.html"] and "Sourdough" in bread["text"]
