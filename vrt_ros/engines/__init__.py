"""Inference engines. Each module is the only importer of its library, and is imported lazily."""
