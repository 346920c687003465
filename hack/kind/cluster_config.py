"""deploy/kind/cluster.yaml, as hack/kind.sh creates it: with KIND_WORKERS worker nodes,
each mounting the same host folder as the control plane (the shared folder, the same
path in every node), and, for a node image built here, kubeadm told where our
control-plane images are and that our pod network (hack/kind/tfmw-podnet, baked into the
node) replaces kindnetd.

usage: cluster_config.py CLUSTER_YAML WORKERS [REPOSITORY ETCD_TAG COREDNS_TAG]
"""

import copy
import sys

import yaml

source, workers = sys.argv[1], int(sys.argv[2])
with open(source) as f:
    config = yaml.safe_load(f)
control_plane = next(n for n in config["nodes"] if n.get("role") == "control-plane")
config["nodes"] = [n for n in config["nodes"] if n.get("role") != "worker"]
for _ in range(workers):
    worker = {"role": "worker"}
    if control_plane.get("extraMounts"):
        worker["extraMounts"] = copy.deepcopy(control_plane["extraMounts"])
    config["nodes"].append(worker)
# Registry hosts from /etc/containerd/certs.d (hack/kind.sh writes the machine-local
# registry's hosts.toml there), as kind's guide to a local registry does.
config.setdefault("containerdConfigPatches", []).append(
    '[plugins."io.containerd.grpc.v1.cri".registry]\n  config_path = "/etc/containerd/certs.d"'
)
if len(sys.argv) > 3:
    repository, etcd_tag, coredns_tag = sys.argv[3:6]
    config.setdefault("networking", {})["disableDefaultCNI"] = True
    patch = {
        "kind": "ClusterConfiguration",
        "imageRepository": repository,
        "etcd": {"local": {"imageTag": etcd_tag}},
        "dns": {"imageTag": coredns_tag},
    }
    config.setdefault("kubeadmConfigPatches", []).append(yaml.safe_dump(patch))
yaml.safe_dump(config, sys.stdout, sort_keys=False)
