"""What the outputs cost: the heads' decode and masks, the 3D output.

Nothing is imported here, so importing one module does not pull in the others."""
