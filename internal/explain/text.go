package explain

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Text renders a report (*UserReport, *AccountReport or *JobReport) for
// people.
func Text(w io.Writer, report any) error {
	var b strings.Builder
	switch r := report.(type) {
	case *UserReport:
		userText(&b, r)
	case *AccountReport:
		accountText(&b, r)
	case *JobReport:
		jobText(&b, r)
	default:
		return fmt.Errorf("explain: no text for %T", report)
	}
	// Tables pad their last cells; lines end without blanks.
	lines := strings.Split(b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	_, err := io.WriteString(w, strings.Join(lines, "\n"))
	return err
}

func userText(b *strings.Builder, r *UserReport) {
	fmt.Fprintf(b, "User %s: %s", r.User, where(r.InPolicy, r.InSlurm))
	if len(r.Roles) > 0 {
		fmt.Fprintf(b, "; %s", strings.Join(r.Roles, ", "))
	}
	b.WriteString("\n")
	fmt.Fprintf(b, "Default account: %s%s; in Slurm: %s%s\n", orDash(r.DefaultAccount), at(r.DefaultSource), orDash(r.LiveDefault),
		flag(r.DefaultDrift, "  DRIFT"))
	for _, m := range r.Accounts {
		fmt.Fprintf(b, "\nAccount %s", m.Account)
		if m.Project != "" {
			fmt.Fprintf(b, " (project %s of tenant %s)", m.Project, m.Tenant)
		}
		if m.Role != "" {
			fmt.Fprintf(b, ", %s", m.Role)
		}
		if m.Default {
			b.WriteString(", default")
		}
		fmt.Fprintf(b, "%s: %s\n", at(m.Source), where(m.InPolicy, m.InSlurm))
		if m.Role == "viewer" {
			b.WriteString("  a viewer sees the project in the portal and has no Slurm association: cannot submit\n")
			continue
		}
		levelsText(b, "  ", m.Levels)
		sharesText(b, "  ", m.FairShare)
	}
	b.WriteString("\nJobs:\n")
	if len(r.Jobs) == 0 {
		b.WriteString("  none running or pending\n")
	} else {
		tw := table(b)
		fmt.Fprintln(tw, "  ID\tNAME\tACCOUNT\tQOS\tSTATE\tGPUS\tWHY IT WAITS")
		for _, j := range r.Jobs {
			why := ""
			if j.Reason != "" || j.Why != "" {
				why = orDash(j.Reason) + ": " + j.Why
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%d\t%s\n", j.ID, orDash(j.Name), j.Account, orDash(j.QOS), j.State, j.GPUs, why)
		}
		tw.Flush()
	}
	notesText(b, r.Notes)
}

func accountText(b *strings.Builder, r *AccountReport) {
	fmt.Fprintf(b, "Account %s", r.Account)
	switch r.Kind {
	case kindProject:
		fmt.Fprintf(b, ": project %s of tenant %s", r.Project, r.Tenant)
	case kindTenant:
		fmt.Fprintf(b, ": tenant %s", r.Tenant)
	}
	fmt.Fprintf(b, "%s, under %s; %s\n", at(r.Source), orDash(r.Parent), where(r.InPolicy, r.InSlurm))
	b.WriteString("\nLimits:\n")
	limitsText(b, "  ", r.Limits)
	if len(r.Above) > 0 {
		b.WriteString("\nLimits above it (its jobs must fit under these too):\n")
		levelsText(b, "  ", r.Above)
	}
	u := r.Usage
	fmt.Fprintf(b, "\nIn use now (running jobs of %s and the accounts below it): %s, %s, %s GiB of memory; %s, %d pending\n",
		r.Account, gpusText(u.GPUs, u.GPUsByType), plural(u.CPUs, "CPU"), num(u.MemoryGiB), plural(int64(u.Running), "running job"), u.Pending)
	if bu := r.Budget; bu != nil {
		fmt.Fprintf(b, "GPU-hour budget: %s GPU-hours%s", num(bu.Hours), at(bu.Source))
		if bu.Used != nil {
			fmt.Fprintf(b, "; used %s (decayed), running jobs may use %s more; %s left\n", hours(*bu.Used), hours(*bu.Running),
				hours(bu.Hours-*bu.Used))
		} else {
			fmt.Fprintf(b, "; used: unavailable (%s)\n", bu.Unavailable)
		}
	} else {
		b.WriteString("GPU-hour budget: none\n")
	}
	if len(r.Users) > 0 {
		fmt.Fprintf(b, "Users: %s\n", strings.Join(r.Users, ", "))
	}
	b.WriteString("\n")
	sharesText(b, "", r.FairShare)
	notesText(b, r.Notes)
}

func jobText(b *strings.Builder, r *JobReport) {
	fmt.Fprintf(b, "Job %d", r.ID)
	if r.Name != "" {
		fmt.Fprintf(b, " %q", r.Name)
	}
	fmt.Fprintf(b, " of %s: %s in account %s", r.User, r.State, r.Account)
	if r.Project != "" {
		fmt.Fprintf(b, " (project %s of tenant %s)", r.Project, r.Tenant)
	}
	fmt.Fprintf(b, ", QOS %s", orDash(r.QOS))
	if r.Class != "" {
		fmt.Fprintf(b, " (class %s", r.Class)
		if r.ClassSource != nil {
			fmt.Fprintf(b, ", %s", r.ClassSource)
		}
		b.WriteString(")")
	}
	fmt.Fprintf(b, ", partition %s", orDash(r.Partition))
	if r.Nodes != "" {
		fmt.Fprintf(b, ", on %s", r.Nodes)
	}
	b.WriteString("\n")
	a := r.Ask
	limit := "none"
	if a.TimeLimitMinutes > 0 {
		limit = dur(minutes(a.TimeLimitMinutes))
	}
	fmt.Fprintf(b, "Asks for: %s, %s, %s GiB of memory, %s, time limit %s\n", gpusText(a.GPUs, a.GPUsByType), plural(a.CPUs, "CPU"),
		num(a.MemoryGiB), plural(a.Nodes, "node"), limit)
	if w := r.Why; w != nil {
		fmt.Fprintf(b, "\nWhy it waits: %s (%s)\n", orDash(w.Reason), w.Meaning)
		if w.Detail != w.Meaning {
			fmt.Fprintf(b, "  %s\n", w.Detail)
		}
		if l := w.Limit; l != nil {
			fmt.Fprintf(b, "  limit: %s %s = %s in Slurm", l.Level, l.Limit.Name, val(l.Limit.Live))
			if s := l.Limit.Source; l.Limit.Policy != nil && s != nil {
				fmt.Fprintf(b, "; policy %s at %s (%s)", val(l.Limit.Policy), s, s.Path)
			} else {
				b.WriteString("; set in Slurm, not by the policy")
			}
			fmt.Fprintf(b, "%s\n", flag(l.Limit.Drift, "  DRIFT"))
		}
		if w.Hint != "" {
			fmt.Fprintf(b, "  what would let it start: %s\n", w.Hint)
		}
	}
	b.WriteString("\nLimits on its way up (Slurm enforces its values):\n")
	levelsText(b, "  ", r.Levels)
	b.WriteString("\n")
	sharesText(b, "", r.FairShare)
	notesText(b, r.Notes)
}

func table(b *strings.Builder) *tabwriter.Writer { return tabwriter.NewWriter(b, 0, 0, 2, ' ', 0) }

// limitsText prints the limits of one association.
func limitsText(b *strings.Builder, indent string, ls []Limit) {
	if len(ls) == 0 {
		b.WriteString(indent + "none\n")
		return
	}
	tw := table(b)
	fmt.Fprintln(tw, indent+"LIMIT\tPOLICY\tSLURM\tIN USE\tUNIT\tFROM")
	for _, l := range ls {
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%s\t%s%s\n", indent, l.Name, val(l.Policy), val(l.Live), val(l.Used), l.Unit, source(l.Source),
			flag(l.Drift, "\tDRIFT"))
	}
	tw.Flush()
}

// levelsText prints the limits of associations on the way up, one table.
func levelsText(b *strings.Builder, indent string, lv []Level) {
	tw := table(b)
	fmt.Fprintln(tw, indent+"LEVEL\tLIMIT\tPOLICY\tSLURM\tIN USE\tUNIT\tFROM")
	for _, l := range lv {
		name := l.Name()
		if !l.InSlurm {
			name += " (not in Slurm)"
		}
		if len(l.Limits) == 0 {
			fmt.Fprintf(tw, "%s%s\t(none)\t\t\t\t\t%s\n", indent, name, source(l.Source))
			continue
		}
		for i, x := range l.Limits {
			if i > 0 {
				name = ""
			}
			fmt.Fprintf(tw, "%s%s\t%s\t%s\t%s\t%s\t%s\t%s%s\n", indent, name, x.Name, val(x.Policy), val(x.Live), val(x.Used), x.Unit,
				source(x.Source), flag(x.Drift, "\tDRIFT"))
		}
	}
	tw.Flush()
}

// sharesText prints fair-share rows from root down.
func sharesText(b *strings.Builder, indent string, rows []ShareLevel) {
	if len(rows) == 0 {
		b.WriteString(indent + "Fair share: unavailable\n")
		return
	}
	b.WriteString(indent + "Fair share (root down; a factor near 1 means high priority):\n")
	tw := table(b)
	fmt.Fprintln(tw, indent+"  ACCOUNT\tUSER\tSHARES\tNORMALIZED\tEFFECTIVE USAGE\tLEVEL FS\tFACTOR")
	for _, s := range rows {
		fmt.Fprintf(tw, "%s  %s\t%s\t%d\t%s\t%s\t%s\t%s\n", indent, s.Account, orDash(s.User), s.Shares, f3(s.SharesNorm),
			f3(s.EffectiveUsage), fptr(s.LevelFS), factorText(s))
	}
	tw.Flush()
}

func notesText(b *strings.Builder, notes []string) {
	if len(notes) == 0 {
		return
	}
	b.WriteString("\nNotes:\n")
	for _, n := range notes {
		fmt.Fprintf(b, "  - %s\n", n)
	}
}

func where(inPolicy, inSlurm bool) string {
	switch {
	case inPolicy && inSlurm:
		return "in the policy and in Slurm"
	case inPolicy:
		return "in the policy, not in Slurm"
	}
	return "in Slurm, not in the policy"
}

func gpusText(n int64, byType map[string]int64) string {
	s := plural(n, "GPU")
	if len(byType) == 0 {
		return s
	}
	types := make([]string, 0, len(byType))
	for t := range byType {
		types = append(types, t)
	}
	sort.Strings(types)
	parts := make([]string, 0, len(types))
	for _, t := range types {
		parts = append(parts, fmt.Sprintf("%s: %d", t, byType[t]))
	}
	return s + " (" + strings.Join(parts, ", ") + ")"
}

func val(v *float64) string {
	if v == nil {
		return "-"
	}
	return num(*v)
}

func hours(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func f3(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

// factorText is a row's fair-share factor; one slurmctld has not computed
// yet says so, rather than 0.000, which reads as the lowest priority.
func factorText(s ShareLevel) string {
	if s.FactorNotComputed {
		return "not computed yet"
	}
	return fptr(s.FairShareFactor)
}

func fptr(v *float64) string {
	if v == nil {
		return "-"
	}
	return f3(*v)
}

func source(s *Source) string {
	if s == nil {
		return "-"
	}
	return s.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func flag(on bool, s string) string {
	if on {
		return s
	}
	return ""
}
