"""The model registry at run time: the snapshot of servers and models every process keeps
(`snapshot`; what moves its stamp: `signals`, connected by gateway/apps.py), which models answer
a call (`routing`) and in what order a pool's deployments take it (`pools`), what a call costs at a
model's price (`prices`, money in integer units), servers cooling down
after a failure (`cooldown`) and their health (`server_health`), model discovery (`discovery`), a Bedrock
server's AWS credentials and signatures (`aws_auth`, shared by the calls and discovery), a Vertex AI
server's Google access tokens (`google_auth`, likewise) and the operator's configuration file (`config_file`).

May import: `gateway.formats`, `gateway.web`, `gateway.telemetry`, `gateway.state`."""
