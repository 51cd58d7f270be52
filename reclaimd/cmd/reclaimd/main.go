// Command reclaimd finds jobs whose allocated GPUs sit idle, warns their
// owners, signals them, then requeues or cancels them through slurmrestd
// under per-tenant rules, and says why. `reclaimd run` is the controller
// (one per cluster); `reclaimd agent` samples a GPU node (one per node).
package main

import (
	"context"
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
		fmt.Fprintln(os.Stderr, "reclaimd:", err)
		os.Exit(1)
	}
}
