// Command kubeadm is upstream's, built from the pinned module: only the kind node
// (hack/kind.sh) needs it, since kind runs `kubeadm init` inside the node.
package main

import (
	"k8s.io/kubernetes/cmd/kubeadm/app"
	utilerrors "k8s.io/kubernetes/cmd/kubeadm/app/util/errors"
)

func main() {
	utilerrors.HandleError(app.Run())
}
