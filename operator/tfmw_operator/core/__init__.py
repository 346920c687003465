"""The pure core: from what is observed, what to do; no I/O."""
