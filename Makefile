# tfmw: see README.md. Every target installs what it needs (make install) first.
SHELL := /bin/bash
# The project's virtual environment (make install makes it, from Debian's python3): its
# bin/ comes first on the PATH, so every recipe, hack/ script and test that runs python3,
# pip, pytest, ruff or mypy gets the venv's, never the system's.
VENV ?= $(CURDIR)/.venv
PYTHON := $(VENV)/bin/python3
export PATH := $(VENV)/bin:$(CURDIR)/hack/bin:$(PATH)
export VIRTUAL_ENV := $(VENV)
CLUSTER_DIR ?= $(CURDIR)/.cluster
SHARED_DIR ?= /var/lib/tfmw/shared
# hack/ scripts and tests read these: overriding CLUSTER_DIR moves the whole cluster.
export TFMW_CLUSTER_DIR := $(CLUSTER_DIR)
export TFMW_SHARED_DIR := $(SHARED_DIR)
export KUBECONFIG ?= $(CLUSTER_DIR)/kubeconfig
PYTEST := $(PYTHON) -m pytest -p no:cacheprovider
# In the venv: deleting .venv makes `make install` run again.
STAMP := $(VENV)/.tfmw-installed
# The released images: $(REGISTRY)/tfmw-operator:$(VERSION) and .../tfmw-trainer:$(VERSION).
# VERSION is pyproject.toml's (the one place it is stated); REGISTRY defaults to the
# machine-local registry (make registry-up; LOCAL_REGISTRY in hack/versions.env).
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
REGISTRY ?= $(shell bash -c 'source hack/versions.env && echo "$$LOCAL_REGISTRY"')
export TFMW_REGISTRY := $(REGISTRY)
export TFMW_IMAGE_TAG := $(VERSION)

.PHONY: help install lint test test-unit test-integration test-e2e test-docs test-faults faults run images cluster-up cluster-down \
	cluster-status deploy namespace-storage namespace-storage-delete kind-namespace-storage kind-namespace-storage-delete demo push registry-up registry-down test-install bench bench-tfjob bench-scale bench-felt bench-goodput kwok-up kwok-down mutate golden kueue-up kueue-down kind-up kind-deploy kind-e2e kind-multinode kind-down test-kind test-multinode \
	bump-kubernetes clean

# Debian packages, .venv (the project editable, with its extras) and hack/bin; again only
# when one of these inputs changed (or .venv was removed).
$(STAMP): pyproject.toml hack/versions.env hack/go.mod hack/install-deps.sh hack/pip_requirements.py
	TFMW_VENV=$(VENV) hack/install-deps.sh
	@touch $@

help: ## the targets, in groups
	@awk 'BEGIN {FS = ":[^#]*## "} /^##@ / {printf "\n%s\n", substr($$0, 5)} /^[a-z][a-z0-9 -]*:.*## / {split($$1, t, " "); printf "  %-24s %s\n", t[1], $$2}' $(MAKEFILE_LIST)

##@ Start here

install: $(STAMP) ## Debian packages, .venv and hack/bin (every target runs it first)

# Not after make install: hack/demo.sh installs only what the demo needs, side by side with
# the builds (TFMW_INSTALLED=1 when make install is up to date already), and prints each
# step's time.
demo: ## a newcomer's first run: cluster, images, operator, the sample trained
	@TFMW_INSTALLED=$$($(MAKE) -q $(STAMP) 2>/dev/null && echo 1) hack/demo.sh

# Helm, from its Go module, for the targets that run it (helm lint, the chart rendered by
# unit and integration tests, make test-install); make install and make demo need none.
.PHONY: helm
helm: install
	@hack/build.sh helm

test: install ## unit, integration, end-to-end and fault tests (the README's test command)
	@hack/stage.sh "unit tests" $(MAKE) --no-print-directory test-unit
	@hack/stage.sh "trainer processes" $(MAKE) --no-print-directory test-trainer
	@hack/stage.sh "sample programs" $(MAKE) --no-print-directory test-programs
	@hack/stage.sh "integration tests" $(MAKE) --no-print-directory test-integration
	@hack/stage.sh "end-to-end tests" $(MAKE) --no-print-directory test-e2e
	@hack/stage.sh "fault tests" $(MAKE) --no-print-directory test-faults

lint: install helm ## ruff, mypy --strict, the import contract (.importlinter), helm lint
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy operator/tfmw_operator trainer/tfmw_trainer client/tfmw_client tests
	PYTHONPATH=operator:trainer:client $(VENV)/bin/lint-imports
	hack/bin/helm lint --strict --quiet charts/tfmw

##@ Tests

test-unit: install helm ## the pure logic, no cluster
	$(PYTEST) -n auto --maxprocesses 4 tests/unit -m "not processes"

# The trainer's tests that train for real: TensorFlow worker processes on localhost with the
# TF_CONFIG the operator writes (tests/unit/trainer, marked `processes`), minutes.
.PHONY: test-trainer
test-trainer: install ## the trainer's multi-worker tests, as local processes
	$(PYTEST) tests/unit/trainer -m processes

# The sample programs of deploy/samples/programs/ run as local processes with the environment
# the operator gives each pod, no cluster (docs/training-program.md, "Programs for every
# topology"): real TensorFlow, a few minutes in all.
.PHONY: test-programs
test-programs: install ## the sample TensorFlow programs, as local processes
	$(PYTEST) tests/programs

test-integration: install helm ## against a real control plane, no node
	hack/cluster.sh up --no-node
	$(PYTEST) tests/integration

test-e2e: install ## on the local cluster with its node, the operator deployed
	hack/up.sh
	$(PYTEST) tests/e2e

# The docs' runnable shell blocks and their minimal training program, on the local cluster
# (docs/development.md, "Docs that run"); also part of test-e2e.
test-docs: install ## the docs' runnable blocks and minimal programs
	hack/up.sh
	$(PYTEST) tests/e2e/test_docs.py

# Faults on the local cluster with its node; prints the table of fault, expected and
# observed end, and seconds to a clear status (also in bench/results/faults.json).
test-faults faults: install ## faults on the local cluster; prints the table
	hack/up.sh
	$(PYTEST) tests/faults

# Kubeflow's own acceptance for the TFJob API (tests/tfjob/README.md): its SDK e2e test,
# unmodified, its TFJob notebook and every TFJob example of training-operator at
# TFJOB_VERSION, with their images built here, against TFJOB_CONTROLLER (kubeflow: Kubeflow's
# training-operator; tfmw: this operator). Each stage's time, then the table of results
# (kept in .tfjob/results-<controller>.json).
.PHONY: test-tfjob
test-tfjob: install ## Kubeflow's SDK e2e test and TFJob examples: TFJOB_CONTROLLER=tfmw|kubeflow
	@hack/stage.sh "cluster (control plane and node)" hack/cluster.sh up
	@hack/stage.sh "images" hack/images.sh
	@hack/stage.sh "Kubeflow's example images (hack/tfjob-images.sh)" hack/tfjob-images.sh
	@hack/stage.sh "Kubeflow's SDK in .tfjob/venv-kubeflow (hack/tfjob-venv.sh)" hack/tfjob-venv.sh >/dev/null
	@hack/stage.sh "TFJob acceptance (tests/tfjob)" $(PYTEST) -s tests/tfjob

# The install path from nothing, on the local cluster: registry up, images pushed, the
# chart installed with helm (then uninstalled, leaving nothing of ours), then the base
# with kubectl apply -k (and delete -k); the sample trained from registry images each
# time (tests/install). Leaves the registry down.
test-install: install helm ## Helm and kustomize installs from a local registry, trained
	hack/cluster.sh up
	$(PYTEST) --tb=short tests/install; status=$$?; hack/registry.sh down; exit $$status

# The kind path end to end, as CI runs it: up, the e2e tests, and down (also on failure).
test-kind: install ## kind up, e2e, down (as CI runs it)
	@hack/stage.sh "kind up" hack/kind.sh up && \
	  hack/stage.sh "kind e2e" $(MAKE) --no-print-directory kind-e2e; \
	  status=$$?; hack/stage.sh "kind down" hack/kind.sh down || status=1; exit $$status

# The multinode suite as CI runs it: a kind cluster of a control plane and two workers up,
# tests/multinode, and down (also on failure).
test-multinode: install ## kind with two workers up, the multinode suite, down
	@KIND_WORKERS=2 hack/stage.sh "kind up (2 workers)" hack/kind.sh up && \
	  KIND_WORKERS=2 hack/stage.sh "multinode tests" $(MAKE) --no-print-directory kind-multinode; \
	  status=$$?; hack/stage.sh "kind down" hack/kind.sh down || status=1; exit $$status

# Pin what the reconcile core decides now (after an intended change; review the diff).
golden: install ## pin what the core decides now (review the diff)
	PYTHONPATH=operator:trainer:tests $(PYTHON) -c \
		"from unit.operator.core.test_reconcile_golden import write_golden; write_golden()"

# Mutation testing of the pure core (not part of make test: it takes minutes).
mutate: install ## mutation testing of the core and the API
	hack/mutate.sh

##@ The local cluster

cluster-up: install ## the local cluster (control plane and node)
	hack/cluster.sh up

cluster-down: ## stop the local cluster
	hack/cluster.sh down

cluster-status: ## what of the local cluster runs
	hack/cluster.sh status

deploy: install ## the operator and its CRD onto the local cluster
	hack/up.sh

# A namespace's own folder and claim tfmw-shared, walled by Pod Security (docs/storage.md,
# "One namespace, one folder"); STORAGE_FLAGS=--set-pod-security raises a weaker label.
# namespace-storage-delete takes the claim and volume away (PURGE=1: the folder too).
namespace-storage: install ## a namespace's own folder and claim, walled: NAMESPACE=<ns>
	@[[ -n "$(NAMESPACE)" ]] || { echo "usage: make namespace-storage NAMESPACE=<namespace>" >&2; exit 2; }
	hack/namespace-storage.sh $(STORAGE_FLAGS) $(NAMESPACE)

namespace-storage-delete: install ## remove a namespace's claim and volume: NAMESPACE=<ns> [PURGE=1]
	@[[ -n "$(NAMESPACE)" ]] || { echo "usage: make namespace-storage-delete NAMESPACE=<namespace> [PURGE=1]" >&2; exit 2; }
	hack/namespace-storage.sh --delete $(if $(PURGE),--purge) $(NAMESPACE)

# Kueue on the local cluster, built from its Go module (the e2e tests start it themselves).
kueue-up: install ## Kueue on the local cluster
	hack/up.sh
	hack/kueue.sh up

kueue-down: ## remove Kueue
	hack/kueue.sh down

# Out of cluster, beside the node: the same shared folder the node's pods write.
run: install ## the operator out of cluster, against KUBECONFIG
	$(PYTHON) -m tfmw_operator --shared-root $(SHARED_DIR) --metrics-port 8080

clean: cluster-down ## stop the cluster, remove build/ and .cluster/
	rm -rf build .cluster

# Another Kubernetes release for hack/: versions.env, go.mod/go.sum, the binaries and the
# CRD's pod template schema, in order (hack/bump-kubernetes.sh). Leaves the cluster down.
bump-kubernetes: install ## another Kubernetes release for hack/: make bump-kubernetes KUBE_VERSION=v1.x.y
	@[[ "$(KUBE_VERSION)" == v1.* ]] || { echo "usage: make bump-kubernetes KUBE_VERSION=v1.x.y" >&2; exit 2; }
	hack/bump-kubernetes.sh $(KUBE_VERSION)

##@ Images and registry

# Built, tagged tfmw-<target>:dev (what the local cluster loads) and $(REGISTRY)/tfmw-<target>:$(VERSION).
images: install ## tfmw-operator:dev and tfmw-trainer:dev (buildah)
	hack/images.sh

# The two images, pushed to $(REGISTRY) (make push REGISTRY=registry.example.com/tfmw).
push: install ## the images, pushed to REGISTRY
	hack/images.sh push

# The machine-local registry (CNCF Distribution, from its Go module): plain HTTP on
# localhost:$$REGISTRY_PORT, storage under /var/lib/tfmw/registry; the local node pulls from it.
registry-up: install ## the machine-local registry
	hack/registry.sh up

registry-down: ## stop the machine-local registry
	hack/registry.sh down

##@ kind

# kind (hack/kind.sh): with Docker and kind installed, plain kind and its node image; on
# a machine with neither (this one), Docker from Debian, kind from its Go module and a
# node image built here from our binaries. The host folder $(KIND_SHARED_DIR) is
# /var/lib/tfmw/shared in the node (deploy/kind/cluster.yaml).
KIND_CLUSTER ?= tfmw
KIND_KUBECONFIG ?= $(HOME)/.kube/config
KIND_SHARED_DIR ?= /tmp/tfmw-shared
# Worker nodes beside the control plane: `make kind-up KIND_WORKERS=2` gives three nodes.
KIND_WORKERS ?= 0
export KIND_CLUSTER KIND_KUBECONFIG KIND_SHARED_DIR KIND_WORKERS
KIND_TEST_ENV = TFMW_E2E_KUBECONFIG=$(KIND_KUBECONFIG) TFMW_E2E_SHARED_DIR=$(KIND_SHARED_DIR) \
	  TFMW_KIND_CLUSTER=$(KIND_CLUSTER) TFMW_KIND_KUBECONFIG=$(KIND_KUBECONFIG)
kind-up: install ## a kind cluster (KIND_WORKERS=2 for three nodes)
	hack/kind.sh up

kind-deploy: install ## images and the operator into kind
	hack/kind.sh deploy

kind-e2e: kind-deploy ## the e2e tests in kind
	$(KIND_TEST_ENV) $(PYTEST) tests/e2e

# tests/multinode on a kind cluster of several nodes (KIND_WORKERS=2): spread training, a
# worker killed, a worker node stopped, the leader's node stopped. Prints the times.
MULTINODE_TESTS ?= tests/multinode
kind-multinode: kind-deploy ## the multinode suite in kind
	$(KIND_TEST_ENV) $(PYTEST) -s $(MULTINODE_TESTS)

kind-namespace-storage: install ## a namespace's storage in kind: NAMESPACE=<ns>
	@[[ -n "$(NAMESPACE)" ]] || { echo "usage: make kind-namespace-storage NAMESPACE=<namespace>" >&2; exit 2; }
	TFMW_KIND_CLUSTER=$(KIND_CLUSTER) TFMW_KIND_KUBECONFIG=$(KIND_KUBECONFIG) TFMW_SHARED_DIR=$(KIND_SHARED_DIR) \
	  hack/namespace-storage.sh $(STORAGE_FLAGS) $(NAMESPACE)

kind-namespace-storage-delete: install ## remove a namespace's claim and volume: NAMESPACE=<ns> [PURGE=1]
	@[[ -n "$(NAMESPACE)" ]] || { echo "usage: make kind-namespace-storage-delete NAMESPACE=<namespace> [PURGE=1]" >&2; exit 2; }
	TFMW_KIND_CLUSTER=$(KIND_CLUSTER) TFMW_KIND_KUBECONFIG=$(KIND_KUBECONFIG) TFMW_SHARED_DIR=$(KIND_SHARED_DIR) \
	  hack/namespace-storage.sh --delete $(if $(PURGE),--purge) $(NAMESPACE)

kind-down: ## delete the kind cluster
	hack/kind.sh down

##@ Benchmarks

bench: install ## the control plane against Kubeflow's TFJob
	hack/cluster.sh up --no-node
	PYTHONPATH=tests $(PYTHON) -m bench.control_plane

# The TFJob API side by side (tests/bench/tfjob_api.py): the same TFJob manifest under tfmw
# (--tfjobs=all) and Kubeflow's TFJob controller (tuned), with a bare client's floor, on the
# real node: create -> all pods Running and -> first step (RUNS jobs), API writes per job, a
# worker's death -> training again per restartPolicy (DEATH_RUNS each). CONTROL_PLANE=1 adds
# bench.control_plane's phase through the TFJob API. JSON in bench/results/tfjob-api.json.
DEATH_RUNS ?= 3
bench-tfjob: install ## the same TFJobs under tfmw and Kubeflow's controller: RUNS=5 DEATH_RUNS=3 [CONTROL_PLANE=1]
	hack/up.sh
	TFMW_BENCH_RUNS=$(RUNS) TFMW_BENCH_DEATH_RUNS=$(DEATH_RUNS) TFMW_BENCH_CONTROL_PLANE=$(CONTROL_PLANE) \
	  PYTHONPATH=$(CURDIR)/tests:$(CURDIR)/operator:$(CURDIR)/trainer:$(CURDIR)/client $(PYTHON) -m bench.tfjob_api

# Simulated nodes (kwok, built from its Go module) on the local control plane (make
# cluster-up, or hack/cluster.sh up --no-node) running already: labelled and tainted tfmw.dev/kwok, so only the scale bench's
# pods land there. kwok-down: kwok stopped, its nodes and their pods deleted.
NODES ?= 100
kwok-up: install ## simulated nodes for the scale bench: NODES=100
	hack/kwok.sh up $(NODES)

kwok-down: ## stop kwok, delete its nodes
	hack/kwok.sh down

# The scale benchmark (tests/bench/scale.py): JOBS gangs of 8 workers on NODES kwok nodes,
# tfmw, the TFJob controller (tuned, as shipped) and the floor each alone; then the seconds
# a user feels on the real node (bench-felt, RUNS runs). Tables printed, JSON in
# bench/results/. Not part of make test. Leaves the cluster up: `make cluster-down` stops it
# and kwok. SCALE_ONLY=1 skips the real node's runs.
JOBS ?= 1000
RUNS ?= 5
bench-scale: install ## JOBS gangs on kwok nodes, then bench-felt (SCALE_ONLY=1 skips it)
	hack/up.sh
	hack/kwok.sh up $(NODES)
	TFMW_BENCH_JOBS=$(JOBS) PYTHONPATH=tests $(PYTHON) -m bench.scale
	[[ -n "$(SCALE_ONLY)" ]] || TFMW_BENCH_RUNS=$(RUNS) PYTHONPATH=tests $(PYTHON) -m bench.felt

# The seconds a user feels (tests/bench/felt.py): tfmw, Kubeflow's TFJob tuned and a bare
# client (the floor) side by side on the local node with the trainer image, RUNS runs:
# apply -> first step, a worker's death -> training again, Succeeded -> workers gone. Table
# printed, JSON in bench/results/felt.json. Not part of make test; never beside bench-scale.
bench-felt: install ## the seconds a user feels, on the real node: RUNS=5
	hack/up.sh
	TFMW_BENCH_RUNS=$(RUNS) PYTHONPATH=tests $(PYTHON) -m bench.felt

# Goodput under failures (tests/bench/goodput.py): the same 2-worker trainer job, restarted in
# place (its template gives its command) and re-created (only args), each once without faults
# (the reference) and once with FAULTS faults, one per FAULT_EVERY seconds of training
# (SIGKILL of a worker's trainer, a worker's pod deleted, in turn). Table printed, JSON in
# bench/results/goodput.json. Not part of make test; about 7 minutes with the defaults.
FAULTS ?= 2
FAULT_EVERY ?= 20
bench-goodput: install ## goodput and time lost per failure, in place vs re-created: FAULTS=2 FAULT_EVERY=20
	hack/up.sh
	TFMW_BENCH_FAULTS=$(FAULTS) TFMW_BENCH_FAULT_EVERY=$(FAULT_EVERY) PYTHONPATH=tests $(PYTHON) -m bench.goodput
