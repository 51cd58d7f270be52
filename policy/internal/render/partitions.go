package render

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/strata-hpc/strata/policy/internal/spec"
)

func init() {
	register(File{Name: "strata/partitions.conf", Dir: DirSlurm, Mode: 0o644,
		Doc: "the classes' partitions, for an Include in slurm.conf", Render: PartitionsConf})
}

// Partition is one line of partitions.conf, with the reasons for its
// derived values.
type Partition struct {
	Name  string
	Nodes string
	// Classes are the classes that run in the partition: its AllowQos.
	Classes []string
	// Accounts are the project accounts that may use one of Classes: its
	// AllowAccounts. Tenant accounts are left out: no job runs in them,
	// and Slurm admits the sub-accounts of a listed account, so a tenant
	// would let in every project of it.
	Accounts []string
	// Default marks the partition of the default class.
	Default bool
	// DefaultTime is the shortest default_time of Classes, a class
	// without one counting its max_time (0: none written). DefaultFrom is
	// the class it comes from, and DefaultFromMax says it is that class's
	// max_time.
	DefaultTime    time.Duration
	DefaultFrom    string
	DefaultFromMax bool
	// MaxTime is the longest max_time of Classes; 0 (UNLIMITED) when one
	// of them has none. MaxFrom is the class it comes from.
	MaxTime time.Duration
	MaxFrom string
	// Options are the policy's other options, as written.
	Options []string
}

// Partitions returns the partitions of cluster.partitions, sorted by name,
// with what the classes and tenants say of each:
//
//   - AllowQos: the classes of the partition (each class is a QOS);
//   - AllowAccounts: the project accounts whose classes include one of
//     them;
//   - MaxTime: the longest max_time of its classes, UNLIMITED when one has
//     none. The partition must admit the longest job of every class; the
//     QOS of each class (MaxWall) holds its own jobs to its max_time;
//   - DefaultTime: the shortest default_time of its classes, a class
//     without default_time counting its max_time, and none when no class
//     gives either. A job that gives no --time gets it, whatever its
//     class, so it must fit the max_time of every class of the partition:
//     a longer one would pend for ever on its QOS's MaxWall;
//   - Default=YES on the partition of cluster.default_class, so that a job
//     naming neither class nor partition runs where its class does.
//
// whole_nodes is not a partition setting: it applies to the multi-node
// jobs of a class only (job_submit gives them --exclusive), and
// OverSubscribe=EXCLUSIVE would give whole nodes to every job of the
// partition, single-GPU jobs of other classes included.
func Partitions(p *spec.Policy) ([]Partition, error) {
	byPart := map[string][]*spec.Class{}
	for i := range p.Classes {
		c := &p.Classes[i]
		if _, ok := p.Cluster.Partitions[c.Partition]; !ok && len(p.Cluster.Partitions) > 0 {
			return nil, fmt.Errorf("class %s runs in partition %s, which cluster.partitions does not declare", c.Name, c.Partition)
		}
		byPart[c.Partition] = append(byPart[c.Partition], c)
	}
	var out []Partition
	for _, name := range slices.Sorted(maps.Keys(p.Cluster.Partitions)) {
		classes := byPart[name]
		slices.SortFunc(classes, func(a, b *spec.Class) int { return strings.Compare(a.Name, b.Name) })
		pt := Partition{Name: name, Nodes: p.Cluster.Partitions[name].Nodes}
		if o := p.Cluster.Partitions[name].Options; strings.TrimSpace(o) != "" {
			pt.Options = strings.Fields(o)
		}
		inPart := map[string]bool{}
		for _, c := range classes {
			pt.Classes = append(pt.Classes, c.Name)
			inPart[c.Name] = true
			pt.Default = pt.Default || c.Name == p.Cluster.DefaultClass
			if t := partitionLimit(c); t > 0 && (pt.DefaultTime == 0 || t < pt.DefaultTime) {
				pt.DefaultTime, pt.DefaultFrom, pt.DefaultFromMax = t, c.Name, c.DefaultTime == 0
			}
		}
		for _, c := range classes {
			if c.MaxTime == 0 {
				pt.MaxTime, pt.MaxFrom = 0, c.Name
				break
			}
			if c.MaxTime.Std() > pt.MaxTime {
				pt.MaxTime, pt.MaxFrom = c.MaxTime.Std(), c.Name
			}
		}
		for _, t := range p.Tenants {
			for _, pr := range t.Projects {
				if slices.ContainsFunc(pr.Classes, func(c string) bool { return inPart[c] }) {
					pt.Accounts = append(pt.Accounts, p.Account(t.Name, pr.Name))
				}
			}
		}
		slices.Sort(pt.Accounts)
		// Parse refuses both; a policy built in code might not, and an
		// empty AllowQos or AllowAccounts would open the partition to all.
		if len(pt.Classes) == 0 {
			return nil, fmt.Errorf("partition %s is the partition of no class", name)
		}
		if len(pt.Accounts) == 0 {
			return nil, fmt.Errorf("no project may use the classes of partition %s (%s)", name, strings.Join(pt.Classes, ", "))
		}
		out = append(out, pt)
	}
	return out, nil
}

// partitionLimit is the time limit a job of class c gets when it gives none and
// the partition does not choose: its default_time, else its max_time.
func partitionLimit(c *spec.Class) time.Duration {
	if c.DefaultTime > 0 {
		return c.DefaultTime.Std()
	}
	return c.MaxTime.Std()
}

// PartitionsConf renders [Partitions] as a slurm.conf include: one
// PartitionName line per partition, each after comments that say where
// its values come from. A policy without cluster.partitions renders a
// file of comments only.
func PartitionsConf(p *spec.Policy) ([]byte, error) {
	parts, err := Partitions(p)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, `# /etc/slurm/strata/partitions.conf: the partitions of the workload classes
# of cluster %s, written by strata-policy render from the policy. Do not
# edit it: the next render overwrites it; change the policy instead.
`, p.Cluster.Name)
	if len(parts) == 0 {
		b.WriteString(`#
# The policy declares no partitions (cluster.partitions), so slurm.conf
# defines them all and this file defines none.
`)
		return b.Bytes(), nil
	}
	b.WriteString(`#
# slurm.conf reads it with "Include /etc/slurm/strata/partitions.conf" and
# must not define these partitions itself: slurmctld stops at a partition
# defined twice. Each partition allows the QOS of its classes (AllowQos) and
# the project accounts that may use them (AllowAccounts). With
# EnforcePartLimits=ALL in slurm.conf, a job outside them is refused at
# submit instead of pending. Apply the policy (strata-policy apply --apply)
# before slurmctld reads this file: Slurm 26.05 stops at an AllowQos it does
# not know. whole_nodes is not written here: it applies to the multi-node
# jobs of a class only, and OverSubscribe=EXCLUSIVE would give whole nodes to
# every job of the partition.
`)
	for _, pt := range parts {
		b.WriteString("\n")
		fmt.Fprintf(&b, "# %s: classes %s", pt.Name, strings.Join(pt.Classes, ", "))
		if pt.Default {
			fmt.Fprintf(&b, "; Default=YES: the default class %s runs here", p.Cluster.DefaultClass)
		}
		fmt.Fprintf(&b, "\n#   AllowAccounts: the projects that may use %s\n", strings.Join(pt.Classes, " or "))
		several := len(pt.Classes) > 1
		if pt.DefaultTime > 0 {
			from := "default_time of " + pt.DefaultFrom
			if pt.DefaultFromMax {
				from = "max_time of " + pt.DefaultFrom + ", which gives no default_time"
			}
			if several {
				from += "; the shortest limit of its classes, so that a job without --time fits each of them"
			}
			fmt.Fprintf(&b, "#   DefaultTime %s: %s\n", slurmTimeLimit(pt.DefaultTime), from)
		}
		switch {
		case pt.MaxTime == 0:
			fmt.Fprintf(&b, "#   MaxTime UNLIMITED: class %s has no max_time\n", pt.MaxFrom)
		case several:
			fmt.Fprintf(&b, "#   MaxTime %s: max_time of %s, the longest of its classes (the QOS of each holds its jobs to its own)\n",
				slurmTimeLimit(pt.MaxTime), pt.MaxFrom)
		default:
			fmt.Fprintf(&b, "#   MaxTime %s: max_time of %s\n", slurmTimeLimit(pt.MaxTime), pt.MaxFrom)
		}
		fields := []string{"PartitionName=" + pt.Name, "Nodes=" + pt.Nodes}
		if pt.Default {
			fields = append(fields, "Default=YES")
		}
		fields = append(fields, "AllowAccounts="+strings.Join(pt.Accounts, ","), "AllowQos="+strings.Join(pt.Classes, ","))
		if pt.DefaultTime > 0 {
			fields = append(fields, "DefaultTime="+slurmTimeLimit(pt.DefaultTime))
		}
		if pt.MaxTime > 0 {
			fields = append(fields, "MaxTime="+slurmTimeLimit(pt.MaxTime))
		} else {
			fields = append(fields, "MaxTime=UNLIMITED")
		}
		fields = append(fields, pt.Options...)
		b.WriteString(strings.Join(fields, " "))
		b.WriteString("\n")
	}
	return b.Bytes(), nil
}

// slurmTimeLimit formats a time limit as scontrol shows it: "04:00:00",
// "7-00:00:00". Policy times are whole minutes; a part of a minute is
// rounded up, as Slurm does.
func slurmTimeLimit(d time.Duration) string {
	m := spec.Duration(d).Minutes()
	days, hours, mins := m/(24*60), m/60%24, m%60
	if days > 0 {
		return fmt.Sprintf("%d-%02d:%02d:00", days, hours, mins)
	}
	return fmt.Sprintf("%02d:%02d:00", hours, mins)
}
