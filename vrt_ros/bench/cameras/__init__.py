"""Many cameras into one node: publishers, the report, the scaling curve.

Nothing is imported here, so importing one module does not pull in the others."""
