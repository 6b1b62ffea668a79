"""What a detection's geometry needs: letterbox geometry and its inverse, NMS, rotated boxes, instance-mask assembly,
un-letterbox and thresholds, drawing.

Nothing is imported here, so importing one module does not pull in the others."""
