"""deploy/kind/cluster.yaml, for a node image built here (hack/kind.sh): the same nodes
and mounts, and kubeadm told where our control-plane images are and that our bridge CNI,
baked into the node, replaces kindnetd.

usage: cluster_config.py CLUSTER_YAML REPOSITORY ETCD_TAG COREDNS_TAG
"""

import sys

import yaml

source, repository, etcd_tag, coredns_tag = sys.argv[1:5]
with open(source) as f:
    config = yaml.safe_load(f)
config.setdefault("networking", {})["disableDefaultCNI"] = True
patch = {
    "kind": "ClusterConfiguration",
    "imageRepository": repository,
    "etcd": {"local": {"imageTag": etcd_tag}},
    "dns": {"imageTag": coredns_tag},
}
config.setdefault("kubeadmConfigPatches", []).append(yaml.safe_dump(patch))
yaml.safe_dump(config, sys.stdout, sort_keys=False)
