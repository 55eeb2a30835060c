"""The HTTP edge (gateway/web/): errors per surface, the hot path, the table of paths, output, middleware."""
