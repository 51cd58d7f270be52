package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/strata-hpc/strata/topogen/internal/apply"
	"github.com/strata-hpc/strata/topogen/internal/model"
	"github.com/strata-hpc/strata/topogen/internal/render"
)

// cmdValidate checks a topology.conf: what apply checks, and what the file
// leaves out of Slurm's reach (render.TopoConf.Reach) against the cluster's
// nodes from the configured node source. The verdict goes to stdout, the
// problems to stderr, one a line.
func cmdValidate(c *cli.Context) error {
	file := c.String("file")
	data, err := apply.ReadTopology(file)
	if err != nil {
		return failure(err)
	}
	if _, err := render.ParseTopologyYAML(data); err == nil && strings.HasPrefix(strings.TrimSpace(stripComments(data)), "- topology:") {
		return exitErr(exitInvalid, fmt.Sprintf("%s is a topology.yaml: validate checks topology.conf files; "+
			"topogen plan and apply (slurm.format: yaml) check the topology.yaml topogen writes", file))
	}
	tc, parseErrs := render.ParseTopoConf(data)
	if what := notTopologyConf(data, parseErrs); what != "" {
		return exitErr(exitInvalid, fmt.Sprintf("%s is not a topology.conf: %s", file, what))
	}
	cfg, err := loadConfig(c)
	if err != nil {
		return err
	}
	given, err := givenNodes(c)
	if err != nil {
		return failure(err)
	}
	nodes, err := model.SlurmNodes(c.Context, cfg, given)
	if err != nil {
		return failure(err)
	}
	problems := apply.Validate(data, nodes)
	reachErrs, warns := tc.Reach(nodes)
	for _, e := range reachErrs {
		problems = append(problems, e.Error())
	}
	stderr := c.App.ErrWriter
	for _, w := range warns {
		fmt.Fprintf(stderr, "%s: warning: %s\n", file, w.Error())
	}
	if len(problems) == 0 {
		fmt.Fprintf(c.App.Writer, "%s is valid.\n", file)
		return nil
	}
	for _, p := range problems {
		fmt.Fprintf(stderr, "%s: %s\n", file, p)
	}
	return exitErr(exitInvalid, fmt.Sprintf("%s is not valid: %d problems (listed above)", file, len(problems)))
}

// slurmConfKeys are keys that begin lines of slurm.conf and never of
// topology.conf.
var slurmConfKeys = map[string]bool{
	"clustername": true, "slurmctldhost": true, "controlmachine": true, "nodename": true, "partitionname": true,
	"slurmuser": true, "slurmctldport": true, "slurmdport": true, "authtype": true, "statesavelocation": true,
	"selecttype": true, "schedulertype": true, "topologyplugin": true, "proctracktype": true, "include": true,
	"switchtype": true, "mpidefault": true, "returntoservice": true, "slurmdspooldir": true, "gresname": true,
}

// notTopologyConf says why data is some other file than a topology.conf
// (a slurm.conf, or lines most of which no topology.conf has), or "". A
// file of another kind would otherwise give one "unknown line type" a
// line, which hides what is wrong.
func notTopologyConf(data []byte, errs []render.ConfError) string {
	// Lines that are no topology.conf line at all: of an unknown type, or
	// not Key=Value words.
	unknown, first := 0, 0
	for _, e := range errs {
		if strings.HasPrefix(e.Msg, "unknown line type") || strings.HasSuffix(e.Msg, "is not Key=Value") {
			unknown++
			if first == 0 {
				first = e.Line
			}
		}
	}
	if unknown == 0 {
		return ""
	}
	lines, keyed := 0, 0
	for n, l := range strings.Split(string(data), "\n") {
		if i := strings.IndexByte(l, '#'); i >= 0 {
			l = l[:i]
		}
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		lines++
		k, _, _ := strings.Cut(f[0], "=")
		if slurmConfKeys[strings.ToLower(k)] {
			keyed++
			if keyed == 1 {
				first = n + 1
			}
		}
	}
	// A stray slurm.conf line in a topology.conf is that line's problem;
	// several, or mostly such lines, are a slurm.conf.
	if keyed >= 3 || keyed > 0 && 2*keyed >= lines {
		return fmt.Sprintf("it looks like a slurm.conf (line %d starts with a slurm.conf key): give the topology.conf, which sits beside slurm.conf "+
			"(/etc/slurm/topology.conf by default)", first)
	}
	if unknown >= 5 && 2*unknown > lines {
		return fmt.Sprintf("%d of its %d lines are not SwitchName, BlockName or BlockSizes lines (the first: line %d): check the path", unknown, lines, first)
	}
	return ""
}

// stripComments is data without its '#' comments.
func stripComments(data []byte) string {
	var b strings.Builder
	for _, l := range strings.Split(string(data), "\n") {
		if i := strings.IndexByte(l, '#'); i >= 0 {
			l = l[:i]
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}
