// Command topogen discovers the fabric (InfiniBand from ibnetdiscover dumps,
// NVLink domains from NVML) and keeps Slurm's topology.conf, topology.yaml
// and gres.conf true, with plan, validation, safe apply and rollback.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		var ex exitError
		if errors.As(err, &ex) {
			if ex.msg != "" {
				fmt.Fprintln(os.Stderr, "topogen:", ex.msg)
			}
			os.Exit(ex.code)
		}
		fmt.Fprintln(os.Stderr, "topogen:", err)
		os.Exit(exitError{code: exitFailure}.code)
	}
}
