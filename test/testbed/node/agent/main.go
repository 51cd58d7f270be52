// Command agent runs commands as root in the node bed's virtual machine
// (see internal/testbed/nodeexec).
//
//	agent serve :26390               # in the guest, started by its init
//	agent exec 127.0.0.1:26390 cmd…  # on the host: stdin, stdout, stderr and exit code pass through
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"

	"github.com/strata-hpc/strata/internal/testbed/nodeexec"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: agent serve ADDR | agent exec ADDR CMD [ARG...]")
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	switch os.Args[1] {
	case "serve":
		ln, err := net.Listen("tcp", os.Args[2])
		if err != nil {
			log.Error("listen", "err", err)
			os.Exit(1)
		}
		log.Info("node agent listening", "addr", ln.Addr())
		log.Error("serve", "err", nodeexec.Serve(ln, log))
		os.Exit(1)
	case "exec":
		if len(os.Args) < 4 {
			fmt.Fprintln(os.Stderr, "usage: agent exec ADDR CMD [ARG...]")
			os.Exit(2)
		}
		var stdin []byte
		if fi, err := os.Stdin.Stat(); err == nil && fi.Mode()&os.ModeCharDevice == 0 {
			stdin, _ = io.ReadAll(os.Stdin)
		}
		resp, err := nodeexec.Run(context.Background(), os.Args[2], nodeexec.Request{Args: os.Args[3:], Stdin: stdin})
		if err != nil {
			fmt.Fprintln(os.Stderr, "agent:", err)
			os.Exit(125)
		}
		_, _ = os.Stdout.Write(resp.Stdout)
		_, _ = os.Stderr.Write(resp.Stderr)
		os.Exit(resp.Code)
	default:
		fmt.Fprintf(os.Stderr, "agent: unknown command %q (serve or exec)\n", os.Args[1])
		os.Exit(2)
	}
}
