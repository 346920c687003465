"""`make test-multinode`: the kind cluster of several nodes, as `make kind-e2e` uses it."""

from e2e.conftest import fresh_name, kube, shared_dir  # noqa: F401  (fixtures shared with e2e)
