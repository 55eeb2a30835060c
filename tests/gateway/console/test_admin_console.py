"""The console's rough edges: help texts shown as written, a model list that fits
beside the navigation and the filters (its prices in one column), and no "View site" link
to a page nothing answers."""

import pytest
from django.urls import reverse

from tests.console_html import list_cells, list_headers
from tests.factories import AccountFactory, ModelFactory, ModelServerFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    client.force_login(AccountFactory(is_staff=True, is_superuser=True, email="operator@example.test"))
    return client


def test_the_server_name_help_text_shows_the_model_id_form(admin_client):
    server = ModelServerFactory(name="gpu-box")
    for url in (reverse("admin:gateway_modelserver_change", args=[server.pk]),
                reverse("admin:gateway_modelserver_add")):
        html = admin_client.get(url).content.decode()
        assert "Used in model ids: <code>&lt;server&gt;/&lt;model&gt;</code>." in html
        assert "Used in model ids: <server>" not in html  # markup the browser would swallow: "/."


def test_the_model_list_has_five_narrow_columns(admin_client):
    ModelFactory(server=ModelServerFactory(name="gpu-box"), name="llama3.1:8b", supports_chat=True,
                 supports_embeddings=True, supports_audio=False, input_price="0.15", output_price="0.6")
    ModelFactory(server=ModelServerFactory(name="tts-box"), name="voice", supports_chat=False,
                 supports_embeddings=False, supports_audio=False)
    html = admin_client.get(reverse("admin:gateway_model_changelist")).content.decode()
    assert list_headers(html) == ["__str__", "capabilities", "enabled", "is_default", "prices"]
    assert sorted(list_cells(html, "capabilities")) == ["chat, embeddings", "none"]
    assert sorted(list_cells(html, "prices")) == ["in 0.15 · out 0.6 USD", "no price"]
    assert "gpu-box/llama3.1:8b" in html


def test_there_is_no_view_site_link(admin_client):
    for url in ("/admin/", reverse("admin:gateway_model_changelist")):
        html = admin_client.get(url).content.decode()
        assert "View site" not in html
