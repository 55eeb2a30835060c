"""Gemini's generateContent format (the Gemini API's and Vertex AI's alike) and the neutral chat form:
the request (`from_chat`, with its content parts in `parts` and its settings in `config`), the
streamed reply read as chat chunks (`streams`), usage and finish reasons (`usage`), and the embedding
calls (`embeddings`); and the Gemini surface's direction: a generateContent request in the chat form
(`to_chat`), chat replies as Gemini's and a Gemini server's own chunks gathered (`replies`).
Plain dict building: the transport (auth, SSE) is the provider's.

May import: `gateway.formats`, `gateway.web`."""

from gateway.formats.gemini.config import cached_content_name
from gateway.formats.gemini.embeddings import embed_request, embeddings_reply
from gateway.formats.gemini.from_chat import chat_to_gemini_request, gemini_output_tool, gemini_request_uncarried
from gateway.formats.gemini.streams import GeminiToChatStream
from gateway.formats.gemini.usage import finish_reason, gemini_usage

__all__ = ["GeminiToChatStream", "cached_content_name", "chat_to_gemini_request", "embed_request",
           "embeddings_reply", "finish_reason", "gemini_output_tool", "gemini_request_uncarried", "gemini_usage"]
