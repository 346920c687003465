"""The I/O shell: gather what is observed, ask the core, carry out its decision."""
