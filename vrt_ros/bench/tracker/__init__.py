"""The tracker: cost per frame, quality on synthetic scenes, a real recording.

Nothing is imported here, so importing one module does not pull in the others."""
