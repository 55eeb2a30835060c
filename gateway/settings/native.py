"""Settings of the native API (native/): chat, model discovery, embeddings and collections, MCP, the agent.

Part of gateway/settings/__init__.py, which puts what `from_env` returns beside its own.
"""

from django.core.exceptions import ImproperlyConfigured

from gateway.settings.environment import Environment, reader, trimmed

# Native chat: tokens of a model's context window kept free for its reply when history is trimmed (at most a
# quarter of the window, native/chat_turn.py).
CHAT_REPLY_RESERVE_TOKENS = 1024


def from_env(env: Environment = None) -> dict:
    env = reader(env)
    found = {
        # Native chat (POST /api/v1/chat): longest message in characters (spec 8.6 default 32000); the
        # largest attachment after base64 decoding, in bytes; the most characters of a text attachment;
        # and how many retrieved chunks of a collection are put before the model.
        "CHAT_MESSAGE_MAX_CHARS": env.int("CHAT_MESSAGE_MAX_CHARS", default=32000),
        "CHAT_ATTACHMENT_MAX_BYTES": env.int("CHAT_ATTACHMENT_MAX_BYTES", default=5 * 1024 * 1024),
        "CHAT_ATTACHMENT_MAX_CHARS": env.int("CHAT_ATTACHMENT_MAX_CHARS", default=100_000),
        "CHAT_REPLY_RESERVE_TOKENS": CHAT_REPLY_RESERVE_TOKENS,
        "CHAT_RETRIEVAL_TOP_K": env.int("CHAT_RETRIEVAL_TOP_K", default=5),
        # Model discovery (POST /api/v1/profiles/refresh, the admin's "discover models"): the longest a
        # model server may take to list its models, in seconds (its own connect timeout still applies).
        "DISCOVERY_TIMEOUT_SECONDS": env.float("DISCOVERY_TIMEOUT_SECONDS", default=10.0),
        # --- Embeddings and collections (native surface) ---
        # The embedding model (`server/model` or a bare name); empty: the first embedding-capable model
        # (by `server/model`) the caller's group may use. Collections are embedded with it.
        "EMBEDDING_MODEL": env.str("EMBEDDING_MODEL", default=""),
        # POST /api/v1/embeddings: items per request and characters per item (spec 8.6).
        "EMBEDDINGS_MAX_ITEMS": env.int("EMBEDDINGS_MAX_ITEMS", default=64),
        "EMBEDDINGS_MAX_CHARS": env.int("EMBEDDINGS_MAX_CHARS", default=8000),
        # Texts per upstream call when a collection's documents are embedded.
        "EMBEDDING_BATCH_SIZE": env.int("EMBEDDING_BATCH_SIZE", default=64),
        # Largest document written to a collection, in bytes (413 beyond it).
        "COLLECTION_MAX_DOCUMENT_BYTES": env.int("COLLECTION_MAX_DOCUMENT_BYTES", default=10 * 1024 * 1024),
        # Chunks of a document: characters per chunk and characters shared by neighbouring chunks.
        "COLLECTION_CHUNK_CHARS": env.int("COLLECTION_CHUNK_CHARS", default=1000),
        "COLLECTION_CHUNK_OVERLAP": env.int("COLLECTION_CHUNK_OVERLAP", default=200),
        # Most hits one search may ask for (`k`).
        "COLLECTION_SEARCH_MAX_K": env.int("COLLECTION_SEARCH_MAX_K", default=50),
        # Memory a process may spend keeping collections' vectors for search, in MiB.
        "COLLECTION_VECTOR_CACHE_MB": env.int("COLLECTION_VECTOR_CACHE_MB", default=1024),
        # --- MCP and the agent ---
        # /api/v1/mcp: Origins besides the gateway's own that may call it from a browser (comma list),
        # and the lifetime in seconds of an MCP session id (after it the client sends initialize again).
        "MCP_ALLOWED_ORIGINS": trimmed(env.list("MCP_ALLOWED_ORIGINS", default=[])),
        "MCP_SESSION_MAX_AGE_SECONDS": env.int("MCP_SESSION_MAX_AGE_SECONDS", default=86400),
        # Agent (POST /api/v1/agent/chat and /run): tool rounds of one chat turn before the model must
        # answer; steps and seconds of one run at most; characters of a tool result given to the model.
        "AGENT_MAX_TOOL_ROUNDS": env.int("AGENT_MAX_TOOL_ROUNDS", default=5),
        "AGENT_RUN_MAX_STEPS": env.int("AGENT_RUN_MAX_STEPS", default=10),
        "AGENT_RUN_TIMEOUT_SECONDS": env.float("AGENT_RUN_TIMEOUT_SECONDS", default=120.0),
        "AGENT_TOOL_RESULT_MAX_CHARS": env.int("AGENT_TOOL_RESULT_MAX_CHARS", default=20000),
        # Tool calls of one model round that are run (the others are answered to the model with an
        # error), and seconds one agent chat turn may take, listing the tools included (then 504).
        "AGENT_MAX_TOOL_CALLS_PER_ROUND": env.int("AGENT_MAX_TOOL_CALLS_PER_ROUND", default=8),
        "AGENT_CHAT_TIMEOUT_SECONDS": env.float("AGENT_CHAT_TIMEOUT_SECONDS", default=120.0),
    }
    if not 0 <= found["COLLECTION_CHUNK_OVERLAP"] < found["COLLECTION_CHUNK_CHARS"]:
        raise ImproperlyConfigured("COLLECTION_CHUNK_OVERLAP must be at least 0 and less than COLLECTION_CHUNK_CHARS.")
    return found
