"""AWS Bedrock's Converse format and the neutral chat form, for every Bedrock model that is not Claude
(Claude takes Anthropic's Messages body on Bedrock): the request (`from_chat`, with its content blocks
in `blocks` and what differs by model family in `families`), ConverseStream's events read as chat
chunks (`streams`), and the InvokeModel bodies of Bedrock's embedding models (`embeddings`). Plain
dict building: the transport (signing, the binary event stream) is the provider's.

May import: `gateway.formats`, `gateway.web`."""
