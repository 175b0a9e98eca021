"""Examples that run as they are: python3 -m dex.examples.first_worker."""
