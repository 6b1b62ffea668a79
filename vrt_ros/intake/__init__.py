"""Frames and encodings on the way in: the encoding table, frame validation and conversion to BGR, compressed decode
and its GPU route, the CPU preprocessing (letterbox + normalise).

Nothing is imported here, so importing one module does not pull in the others."""
