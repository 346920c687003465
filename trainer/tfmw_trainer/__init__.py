"""tfmw's reference trainer: MultiWorkerMirroredStrategy on data it generates."""
