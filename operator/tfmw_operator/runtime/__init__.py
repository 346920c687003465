"""The process: settings, health, leadership, metrics, versions."""
