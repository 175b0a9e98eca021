"""A fake of OpenTelemetry's API package for the tests: the part of its
surface dex.tracing uses, with the same names and signatures, recording the
spans it starts (opentelemetry.trace.FINISHED)."""
