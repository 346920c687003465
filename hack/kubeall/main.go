// Command kubeall is a multi-call binary holding the Kubernetes components the
// local cluster needs. Linking them once instead of six times is what makes a
// cold build affordable on a two-core machine. It dispatches on the name it is
// invoked as (symlinks kube-apiserver, kubectl, ...) or on its first argument.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	_ "time/tzdata" // CronJob time zones in the controller-manager

	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

var commands = map[string]func(){
	"kube-apiserver": func() { os.Exit(cli.Run(apiserver.NewAPIServerCommand())) },
	"kube-controller-manager": func() {
		os.Exit(cli.Run(controllermanager.NewControllerManagerCommand()))
	},
	"kube-scheduler": func() { os.Exit(cli.Run(scheduler.NewSchedulerCommand())) },
	"kube-proxy":     func() { os.Exit(cli.Run(proxy.NewProxyCommand())) },
	"kubelet":        func() { os.Exit(cli.Run(kubelet.NewKubeletCommand(context.Background()))) },
	"kubectl": func() {
		logs.GlogSetter(kubectlcmd.GetLogVerbosity(os.Args)) //nolint:errcheck
		if err := cli.RunNoErrOutput(kubectlcmd.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
	},
	"etcd": func() { etcdmain.Main(os.Args) },
}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := commands[name]; !ok && len(os.Args) > 1 {
		name = os.Args[1]
		os.Args = append([]string{name}, os.Args[2:]...)
	}
	run, ok := commands[name]
	if !ok {
		names := make([]string, 0, len(commands))
		for n := range commands {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: kubeall COMMAND [args...]; commands: %v\n", names)
		os.Exit(2)
	}
	run()
}
