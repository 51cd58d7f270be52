// Package diff shows how a file topogen would write differs from the live
// one, line by line, for plan.
package diff

import "strings"

// Lines lists the lines removed from old ("- line") and then the lines
// added in new ("+ line"), each in file order. A line counts as kept as
// often as it appears in both; blank lines are not listed. Topology files
// are sets of lines, so the order of lines is not a change.
func Lines(old, new []byte) []string {
	oldLines := strings.Split(strings.TrimRight(string(old), "\n"), "\n")
	newLines := strings.Split(strings.TrimRight(string(new), "\n"), "\n")
	inOld, inNew := map[string]int{}, map[string]int{}
	for _, l := range oldLines {
		inOld[l]++
	}
	for _, l := range newLines {
		inNew[l]++
	}
	var out []string
	for _, l := range oldLines {
		if inNew[l] > 0 {
			inNew[l]--
			continue
		}
		if l != "" {
			out = append(out, "- "+l)
		}
	}
	for _, l := range newLines {
		if inOld[l] > 0 {
			inOld[l]--
			continue
		}
		if l != "" {
			out = append(out, "+ "+l)
		}
	}
	return out
}
