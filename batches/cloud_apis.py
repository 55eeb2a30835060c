"""The batch API of each kind of server a batch may be forwarded to (batches/forward.py): OpenAI's and Anthropic's
(batches/clouds.py), and each further cloud's from a module of its own, one entry each."""

from batches import clouds
from batches.clouds_vertex import VertexClaudeBatches
from gateway.models import ModelServer

APIS = {
    **clouds.APIS,
    ModelServer.Kind.VERTEX: VertexClaudeBatches,  # Anthropic message batches of Claude (clouds_vertex.py)
}
