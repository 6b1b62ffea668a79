"""How fast the node is back: cold and warm starts, lifecycle, respawn after a fault.

Nothing is imported here, so importing one module does not pull in the others."""
