"""Fuzz campaigns against a running node and the soak.

Nothing is imported here, so importing one module does not pull in the others."""
