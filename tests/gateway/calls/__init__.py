"""A model call: token counting, the models a caller may use (gateway/calls/)."""
