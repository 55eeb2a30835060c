"""The OpenAPI document (gateway/openapi/)."""
