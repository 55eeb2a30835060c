"""The model server list's columns that keep it within a 1366-pixel screen beside the sidebar:
the kind by a short name on one line (its choice label, "OpenAI-compatible (vLLM,
Ollama, llama.cpp, OpenAI)", wrapped over five lines; the whole label is its tooltip), the base URL
with room to be read and allowed to break anywhere (console.css), the API key's presence in a narrow
column (in words: "not needed" for a local server without one), and discovery's time or error in one
column. Whether a server is remote is left to the list's filter and the server's page. The health columns stay those of
gateway/console/server_admin.py. Each is a function the admin's `list_display` names
(gateway/admin.py)."""

from __future__ import annotations

from django.contrib import admin
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.timezone import localtime

from gateway.models import ModelServer

SHORT_KINDS = {ModelServer.Kind.OPENAI: "OpenAI API", ModelServer.Kind.ANTHROPIC: "Anthropic",
               ModelServer.Kind.BEDROCK: "Bedrock", ModelServer.Kind.AZURE: "Azure",
               ModelServer.Kind.VERTEX: "Vertex AI", ModelServer.Kind.GEMINI: "Gemini API"}


@admin.display(description="Kind", ordering="kind")
def kind_label(server) -> str:
    return format_html('<span style="white-space: nowrap" title="{}">{}</span>', server.get_kind_display(),
                       SHORT_KINDS.get(server.kind, server.kind))


@admin.display(description="Base URL", ordering="base_url")
def address(server) -> str:
    return server.base_url


@admin.display(description="Key")
def key_set(server) -> str:
    """Whether the server has an API key (never the key), in words: "set"; for a local server without one,
    "not needed", quiet, since a local server (Ollama, vLLM, llama.cpp) usually takes none and a red mark read
    as an error; for a remote one without, "none" (a cloud provider refuses calls without its key)."""
    if server.api_key:
        state, look, tip = "set", "", ""
    elif not server.is_remote:
        state, look, tip = "not needed", "text-font-subtle-light dark:text-font-subtle-dark", \
            "A local server usually takes no key"
    else:
        state, look, tip = "none", "text-red-600 dark:text-red-500", "A remote provider refuses calls without its key"
    return format_html('<span class="key-state {}" data-key="{}" title="{}">{}</span>', look, state.replace(" ", "-"),
                       tip, state)


@admin.display(description="Discovery", ordering="discovered_at")
def discovery(server) -> str:
    """When model discovery last asked the server, or why it failed."""
    if server.discovery_error:
        return f"failed: {server.discovery_error}"
    if server.discovered_at is None:
        return "not run"
    return date_format(localtime(server.discovered_at), "SHORT_DATETIME_FORMAT")
