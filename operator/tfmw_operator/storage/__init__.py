"""The shared storage: job folders, markers, documents, logs, and noticing their changes."""
