"""Google's two kinds of model server: Google Vertex AI (`vertex`: Gemini and the partner models of a Google
Cloud project, Claude among them) and the Gemini API (`gemini`, generativelanguage.googleapis.com).

Each kind's module (`vertex`, `gemini`) is the provider interface gateway/upstream/providers/__init__.py
dispatches to. A Vertex AI target whose publisher is Anthropic speaks `anthropic` (`claude`: streamRawPredict);
every other target speaks `gemini` (`generate`: streamGenerateContent). Addresses, credentials and Google's
failures: `transport`; embeddings: `embeddings`."""
