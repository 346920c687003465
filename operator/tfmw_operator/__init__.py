"""tfmw: a Kubernetes operator for TensorFlow multi-worker training."""
