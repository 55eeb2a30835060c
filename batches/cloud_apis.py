"""The batch API of each kind of server a batch may be forwarded to (batches/forward.py reads `APIS`): OpenAI's
and Anthropic's (batches/clouds.py), and each cloud's own, from its module. One line each, so that adding a
cloud adds lines and changes none."""

from batches import clouds
from batches.clouds_bedrock import BedrockBatches
from batches.clouds_vertex import VertexClaudeBatches
from gateway.models import ModelServer

APIS = {
    **clouds.APIS,
    ModelServer.Kind.BEDROCK: BedrockBatches,
    ModelServer.Kind.VERTEX: VertexClaudeBatches,  # Anthropic message batches of Claude (clouds_vertex.py)
}
