"""The TFMultiWorkerJob API: names, the typed spec and status, time, JSON."""
