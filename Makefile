# kopf-dra: `make run` starts the system on the local control plane; `make test` checks everything.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CONTROL_PLANE_DIR ?= $(HOME)/.cache/kopf-dra/local
export KOPF_DRA_CONTROL_PLANE_DIR ?= $(CONTROL_PLANE_DIR)

KIND ?= kind
KIND_CLUSTER ?= kopf-dra
# kind runs the default release, whose gates e2e/kind/cluster.yaml switches (KIND_GATES), whatever
# KOPF_DRA_KUBERNETES_VERSION chooses for the local control plane.
KIND_NODE_IMAGE ?= kindest/node:$(shell cat hack/controlplane/VERSION)
# The image tag is the package version (operators/__init__.py), as in manifests/ and the chart.
VERSION := $(shell sed -n 's/^__version__ = "\(.*\)"/\1/p' operators/__init__.py)
IMAGE ?= kopf-dra:$(VERSION)
KIND_KUBECONFIG := $(CURDIR)/.kind-kubeconfig
# The kind cluster's DRA feature gates as a --feature-gates value: the local control plane's of
# the default release.
KIND_GATES := $(PY) -c 'from operators.api.features import format_feature_gates as f; \
  from operators.localcluster.controlplane import default_version, feature_gates as g; \
  print(f(g(default_version())))'
# `make run KUBECONFIG=...` (on the command line) runs against that cluster; a KUBECONFIG merely
# exported in the shell does not redirect `make run` away from the local control plane.
DEMO_ARGS := $(if $(filter command line,$(origin KUBECONFIG)),--kubeconfig $(KUBECONFIG))
# `make run REAL_NODE=1`: the two workers are real kubelets with containerd
# (operators/localcluster/realnode.py).
DEMO_ARGS += $(if $(REAL_NODE),--real-node)
# `make run CLUSTER=1`: kopf-dra as pods, installed with Helm, on the complete local cluster.
DEMO_ARGS += $(if $(CLUSTER),--in-cluster)
PY_PATHS := operators tests bench e2e hack/config_reference.py hack/node/oci-image.py hack/image/oci-pack.py

.PHONY: help venv lint fmt test unit integration e2e e2e-node e2e-cluster cluster e2e-kind chaos image docs helm promtool bench bench-scheduler bench-compare bench-tenants bench-fabric bench-topology simulate-differential \
        control-plane control-plane-up control-plane-down run clean cel-oracle allocator-oracle \
        test-previous test-next test-release

help:
	@echo "make run               the whole system on virtual nodes, with a live view (Ctrl-C stops)"
	@echo "make run KUBECONFIG=f  the operators against an existing cluster, with the live view"
	@echo "make run REAL_NODE=1   two real kubelets + containerd here: pods run with their devices (root)"
	@echo "make run CLUSTER=1     kopf-dra as pods from its image, installed with Helm on the local cluster (root)"
	@echo "make test              lint, then unit + integration tests and the e2e scenarios"
	@echo "make e2e               the example scenarios on the local control plane"
	@echo "make test-previous     the scheduler, controllers and driver tests and e2e on Kubernetes 1.36.3"
	@echo "make test-next         the same on the next minor's newest pre-release (1.38.0-beta.0)"
	@echo "make e2e-node          the scenarios with real pods on two local kubelets (root; builds them)"
	@echo "make e2e-cluster       kopf-dra's image installed with kubectl apply -k on the complete local cluster (root)"
	@echo "make cluster           the complete local cluster (kubelets, kube-proxy, CoreDNS) with the image (root)"
	@echo "make e2e-kind          the same scenarios on a kind cluster (needs docker, kind, kubectl)"
	@echo "make chaos             seeded faults on the local control plane, then invariants (CHAOS_ARGS=--list)"
	@echo "make image             the image as an OCI archive, without Docker (ctr -n k8s.io images import)"
	@echo "make helm              build the pinned helm client (hack/helm) into the cache"
	@echo "make promtool          build the pinned promtool (hack/promtool) into the cache"
	@echo "make docs              regenerate README's configuration reference"
	@echo "make lint              ruff, mypy --strict, import-linter"
	@echo "make control-plane-up  start the local control plane in the background"
	@echo "make control-plane-down  stop it"
	@echo "make bench             CEL and allocator benchmarks (bench/)"
	@echo "make simulate-differential  simulate against the running scheduler on 200 random states"
	@echo "make cel-oracle        100,000 random CEL evaluations against Kubernetes 1.36's, 1.37's and 1.38's (CEL_ORACLE_ARGS=--kubernetes 1.37)"
	@echo "make allocator-oracle  20,000 random allocator problems per release against Kubernetes' 1.36, 1.37 and 1.38 (ALLOCATOR_ORACLE_ARGS=--seed S)"
	@echo "make bench-scheduler   scheduler throughput on the local control plane (BENCH_ARGS=--workload upstream)"
	@echo "make bench-fabric      fabric attach-to-bind latency on the local control plane"
	@echo "make bench-compare     kopf-dra against kube-scheduler + kube-controller-manager, side by side"
	@echo "make bench-tenants     one tenant's expensive selectors against another's pod, beside kube-scheduler"
	@echo "make bench-topology    a rack-constrained gang: the attempts kopf-dra's device count per rack saves"

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	@touch $@

venv: $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check $(PY_PATHS)
	$(VENV)/bin/ruff format --check $(PY_PATHS)
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

fmt: $(STAMP)
	$(VENV)/bin/ruff format $(PY_PATHS)
	$(VENV)/bin/ruff check --fix $(PY_PATHS)

control-plane: $(STAMP)
	@hack/controlplane/build.sh >/dev/null

# The chart's tests render it with this helm (tests/integration/test_chart.py).
helm:
	@hack/helm/build.sh >/dev/null

# The chart's alerts are checked and unit-tested with it (tests/integration/test_monitoring.py).
promtool:
	@hack/promtool/build.sh >/dev/null

unit: $(STAMP)
	$(VENV)/bin/pytest -q tests/unit

integration: $(STAMP) control-plane helm promtool
	$(VENV)/bin/pytest -q tests/integration

# The e2e scenarios run in a pytest session of their own: their conftest owns the cluster.
# The real-node session follows (skipped, naming what is missing, where the machine cannot).
test: lint control-plane helm promtool
	$(VENV)/bin/pytest -q tests
	$(VENV)/bin/pytest -q e2e
	$(MAKE) --no-print-directory test-previous
	$(MAKE) --no-print-directory test-next
	$(MAKE) --no-print-directory e2e-node
	$(MAKE) --no-print-directory e2e-cluster

# The other minors kopf-dra supports, each on a control plane of its release: the minor before
# the default (the first of hack/controlplane/VERSIONS, 1.36.3) and the next minor, followed
# from its newest pre-release (the last of VERSIONS when newer than VERSION: 1.38.0-beta.0;
# hack/next-release.sh finds a newer tag and moves the pin). Each runs the integration tests of
# the scheduler (beside that release's kube-scheduler too: test_whole_pod.py), the claim
# controllers, the pool validator and the driver, and the e2e scenarios.
# The next minor's set adds the pod group tests (NEXT_TESTS). `make test-release
# RELEASE=v1.38.0-beta.0` runs the common set on any release of VERSIONS (TESTS="..." another).
PREVIOUS_RELEASE := $(firstword $(shell cat hack/controlplane/VERSIONS))
NEXT_RELEASE := $(shell v=$$(tail -n1 hack/controlplane/VERSIONS); \
  [ "$$(printf '%s\n%s\n' $$(cat hack/controlplane/VERSION) $$v | sort -V | tail -n1)" = \
    "$$(cat hack/controlplane/VERSION)" ] || echo $$v)
RELEASE_TESTS := tests/integration/test_smoke.py tests/integration/test_feature_gates.py \
  tests/integration/test_scheduler.py tests/integration/test_scheduler_scenarios.py \
  tests/integration/test_scheduler_faults.py tests/integration/test_preemption.py \
  tests/integration/test_extended_resources.py tests/integration/test_claim_controllers.py \
  tests/integration/test_pool_validator.py tests/integration/test_whole_pod.py \
  tests/integration/driver
# Pod groups and 1.37's new fields, which 1.36 does not have.
NEXT_TESTS := $(RELEASE_TESTS) tests/integration/test_gang_scheduling.py \
  tests/integration/test_group_preemption.py tests/integration/test_podgroup_claims.py \
  tests/integration/test_api_137.py tests/integration/test_topology_groups.py
test-release: $(STAMP)
	@[ -n "$(RELEASE)" ] || { echo "RELEASE=v1.X.Y: one of $$(paste -sd' ' hack/controlplane/VERSIONS)"; exit 2; }
	KOPF_DRA_KUBERNETES_VERSION=$(RELEASE) hack/controlplane/build.sh >/dev/null
	KOPF_DRA_KUBERNETES_VERSION=$(RELEASE) $(VENV)/bin/pytest -q -p no:cacheprovider \
	  $(or $(TESTS),$(RELEASE_TESTS))
	KOPF_DRA_KUBERNETES_VERSION=$(RELEASE) $(VENV)/bin/pytest -q -p no:cacheprovider e2e

test-previous:
	@$(MAKE) --no-print-directory test-release RELEASE=$(PREVIOUS_RELEASE)

test-next:
	@$(if $(NEXT_RELEASE),$(MAKE) --no-print-directory test-release RELEASE=$(NEXT_RELEASE) \
	  TESTS="$(NEXT_TESTS)",\
	  echo "== test-next: no minor newer than $$(cat hack/controlplane/VERSION) is followed")

# The scenarios on real kubelets with containerd (e2e/node/): builds and caches what it needs
# (hack/node/build.sh), installs Debian's runc, CNI plugins and busybox when root and missing.
e2e-node: $(STAMP) control-plane
	@hack/node/install-deps.sh
	KOPF_DRA_E2E_NODE=1 $(VENV)/bin/pytest -q -p no:cacheprovider e2e/node

e2e: $(STAMP) control-plane
	$(VENV)/bin/pytest -q e2e

# kopf-dra deployed for real (e2e/cluster/): its image (make image) imported into the nodes of
# the complete local cluster (kopf-dra cluster up), installed as the README says, then the
# checks of e2e/cluster/ and the example scenarios, every pod placed by the in-cluster
# scheduler: once with `kubectl apply --server-side -k e2e/cluster/overlay`, once with
# `helm install` (and upgrade, uninstall), each on a cluster of its own; then `make run CLUSTER=1`
# once (demo). Root; builds and caches what it needs. E2E_CLUSTER_INSTALLS=helm runs one.
# The kustomize install's cluster has nodes of both minors, as the version skew policy allows
# (SKEWED_NODES: the first kubelet of the minor before, the second the control plane's); Helm's
# and the demo's nodes are the control plane's release. The upgrade session starts the cluster
# on the minor before, installs kopf-dra with Helm and upgrades the control plane, then the
# kubelets, to the control plane's release under it (e2e/cluster/test_upgrade.py); the
# upgrade-next session starts on the control plane's release and upgrades the control plane to
# the next minor's pre-release (NEXT_RELEASE), the kubelets and kube-proxy staying on theirs as
# the version skew policy allows (1.38.0-beta.0's cannot be built here: the Go module proxy does
# not serve sigs.k8s.io/iptables-wrappers, which they need).
E2E_CLUSTER_INSTALLS ?= kustomize helm upgrade $(if $(NEXT_RELEASE),upgrade-next) demo
CONTROL_PLANE_RELEASE := $(or $(KOPF_DRA_KUBERNETES_VERSION),$(shell cat hack/controlplane/VERSION))
SKEWED_NODES ?= $(PREVIOUS_RELEASE),$(CONTROL_PLANE_RELEASE)
e2e-cluster: $(STAMP) control-plane helm
	@hack/node/install-deps.sh
	@hack/image/install-deps.sh
	@for install in $(E2E_CLUSTER_INSTALLS); do \
	  nodes=$$([ $$install = kustomize ] && echo "$(SKEWED_NODES)" || true); \
	  release=$(CONTROL_PLANE_RELEASE); to=""; nodes_to=""; \
	  if [ $$install = upgrade ]; then \
	    [ "$(PREVIOUS_RELEASE)" = "$(CONTROL_PLANE_RELEASE)" ] && { \
	      echo "== e2e-cluster: no upgrade, $(CONTROL_PLANE_RELEASE) is the oldest release"; continue; }; \
	    release=$(PREVIOUS_RELEASE); to=$(CONTROL_PLANE_RELEASE); \
	  fi; \
	  if [ $$install = upgrade-next ]; then \
	    install=upgrade; to=$(NEXT_RELEASE); nodes_to=$(CONTROL_PLANE_RELEASE); \
	  fi; \
	  echo "== e2e-cluster, installed with $$install on $$release$${nodes:+, kubelets $$nodes}$${to:+, to $$to}"; \
	  KOPF_DRA_KUBERNETES_VERSION=$$release KOPF_DRA_NODE_KUBERNETES_VERSION=$$nodes \
	  KOPF_DRA_E2E_UPGRADE_TO=$$to KOPF_DRA_E2E_UPGRADE_NODES_TO=$$nodes_to \
	  KOPF_DRA_E2E_INSTALL=$$install KOPF_DRA_E2E_CLUSTER=1 KOPF_DRA_E2E_IN_CLUSTER=1 \
	    $(VENV)/bin/pytest -q -p no:cacheprovider e2e/cluster || exit 1; \
	done

# The complete local cluster in the foreground, the image imported into every node; Ctrl-C tears
# it down and restores the host. `make cluster NODES=3`.
NODES ?= 2
cluster: $(STAMP) control-plane
	@hack/node/install-deps.sh
	@hack/image/install-deps.sh
	$(VENV)/bin/kopf-dra cluster up --nodes $(NODES) --image "$$(PYTHON=$(PY) hack/image/build.sh)"

# Seeded fault scenarios, one fresh local control plane each; PASS/FAIL per invariant.
# CHAOS_ARGS="--scenario kill-scheduler --seed 3" picks runs; "--list" names the scenarios.
chaos: $(STAMP) control-plane
	$(PY) -m e2e.chaos $(CHAOS_ARGS)

# The image as an OCI archive, built here without a registry or a Docker daemon (hack/image/build.sh:
# Debian's packages and the wheels at their locked versions, kopf-dra's wheel from this tree),
# into ~/.cache/kopf-dra/image and reused while its inputs stay; prints the archive's path.
image: $(STAMP)
	@hack/image/install-deps.sh
	@archive=$$(PYTHON=$(PY) hack/image/build.sh) && \
	  echo "load it into containerd: ctr -n k8s.io images import $$archive ($(IMAGE))" >&2 && \
	  echo "$$archive"

# Creates the kind cluster (unless it exists), builds the image with `docker build` from the
# Dockerfile as users with a registry do (`make image` is the OCI archive) and loads it, installs
# everything with `kubectl apply -k manifests/`, and runs the same scenarios against it.
e2e-kind: $(STAMP)
	@echo "docker build -t $(IMAGE) . (the Dockerfile, as with a registry; make image: OCI archive)"
	docker build -t $(IMAGE) .
	@$(KIND) get clusters | grep -qx $(KIND_CLUSTER) || \
	  $(KIND) create cluster --name $(KIND_CLUSTER) --config e2e/kind/cluster.yaml \
	    --image $(KIND_NODE_IMAGE)
	$(KIND) get kubeconfig --name $(KIND_CLUSTER) > $(KIND_KUBECONFIG)
	$(KIND) load docker-image $(IMAGE) --name $(KIND_CLUSTER)
	kubectl --kubeconfig $(KIND_KUBECONFIG) apply --server-side -k manifests/
	@# The fabric manager's tokens (manifests/fabric/README.md): made once per cluster, kept.
	kubectl --kubeconfig $(KIND_KUBECONFIG) -n kopf-dra get secret kopf-dra-fabric-tokens \
	  >/dev/null 2>&1 || kubectl --kubeconfig $(KIND_KUBECONFIG) -n kopf-dra create secret \
	  generic kopf-dra-fabric-tokens --from-literal=default=$$(openssl rand -hex 32)
	@# Every component gets the cluster's gates (e2e/kind/cluster.yaml = the control plane's).
	kubectl --kubeconfig $(KIND_KUBECONFIG) -n kopf-dra set env deployment,daemonset --all \
	  KOPF_DRA_FEATURE_GATES=$$($(KIND_GATES))
	kubectl --kubeconfig $(KIND_KUBECONFIG) -n kopf-dra rollout status deployment --timeout=180s
	kubectl --kubeconfig $(KIND_KUBECONFIG) -n kopf-dra rollout status daemonset --timeout=180s
	KOPF_DRA_USE_EXISTING_CLUSTER=1 KOPF_DRA_E2E_IN_CLUSTER=1 KUBECONFIG=$(KIND_KUBECONFIG) \
	  KOPF_DRA_FEATURE_GATES=$$($(KIND_GATES)) \
	  $(VENV)/bin/pytest -q e2e --ignore=e2e/test_chaos.py

docs: $(STAMP)
	$(PY) hack/config_reference.py --write

# Pure benchmarks (CEL, allocator); the cluster ones have targets of their own.
bench: $(STAMP)
	@for b in bench/bench_cel.py bench/bench_allocator.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# Random selectors and devices, evaluated by kopf-dra and by Kubernetes' own CEL (hack/cel-oracle,
# needs Go), of each minor kopf-dra speaks in turn (--kubernetes M for one); prints every
# distinct disagreement.
CEL_ORACLE_ARGS ?= --examples 100000
cel-oracle: $(STAMP)
	$(PY) -m tests.unit.cel.differential $(CEL_ORACLE_ARGS)

# Random problems, allocated by kopf-dra and by Kubernetes' own allocator (hack/allocator-oracle,
# needs Go), once per release (1.36, 1.37, 1.38: --kubernetes R for one); prints the seed, the counts
# and every distinct disagreement (make test: 150 per release).
ALLOCATOR_ORACLE_ARGS ?= --examples 20000
allocator-oracle: $(STAMP)
	$(PY) -m tests.unit.allocator.differential $(ALLOCATOR_ORACLE_ARGS)

# simulate's answers against the running scheduler's on 200 random cluster states (make test: 12).
simulate-differential: $(STAMP) control-plane
	KOPF_DRA_SIMULATE_STATES=200 $(VENV)/bin/pytest -q tests/integration/test_simulate_differential.py

bench-scheduler: $(STAMP) control-plane
	$(PY) bench/bench_scheduler.py $(BENCH_ARGS)

bench-compare: $(STAMP) control-plane
	$(PY) -m bench.bench_compare $(BENCH_ARGS)

bench-tenants: $(STAMP) control-plane
	$(PY) -m bench.bench_tenants $(BENCH_ARGS)

bench-fabric: $(STAMP) control-plane
	$(PY) bench/bench_fabric.py $(BENCH_ARGS)

bench-topology: $(STAMP)
	$(PY) -m bench.bench_topology $(BENCH_ARGS)

control-plane-up: control-plane
	@$(VENV)/bin/kopf-dra control-plane up

control-plane-down: $(STAMP)
	@$(VENV)/bin/kopf-dra control-plane down

run: $(STAMP) control-plane $(if $(CLUSTER),helm)
	@$(if $(CLUSTER),hack/node/install-deps.sh && hack/image/install-deps.sh &&) \
	  $(VENV)/bin/kopf-dra demo $(DEMO_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis $(KIND_KUBECONFIG)
