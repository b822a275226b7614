"""The live pipelines: a source's events through the engine to the sinks and the view."""
