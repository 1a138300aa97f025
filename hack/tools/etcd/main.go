// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3 so that
// envtest has an etcd on machines that cannot download release archives.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
