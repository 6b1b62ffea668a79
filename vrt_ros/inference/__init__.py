"""The pipeline the node sees (process, process_batch, make_pipeline), its backends (CPU reference, CUDA), batch
planning and the one-frame-at-a-time batch.

Nothing is imported here, so importing one module does not pull in the others."""
