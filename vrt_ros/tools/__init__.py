"""Command-line tools that are not part of the node (model preparation)."""
