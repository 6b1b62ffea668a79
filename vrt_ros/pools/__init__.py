"""Per-key caches, the growing buffer pool and the byte budget the pools share.

Nothing is imported here, so importing one module does not pull in the others."""
