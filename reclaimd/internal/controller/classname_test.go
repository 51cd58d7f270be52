package controller

import (
	"testing"

	"github.com/strata-hpc/strata/internal/slurmrest"
)

// TestClassName: the class comes from a strata:class= item of the comment,
// whether items are separated by spaces or commas, else the partition.
func TestClassName(t *testing.T) {
	for _, tc := range []struct{ comment, partition, want string }{
		{"strata:class=train", "gpu", "train"},
		{"strata:class=train,strata:serve=llm", "gpu", "train"},
		{"strata:serve=llm, strata:class=batch", "gpu", "batch"},
		{"nightly run strata:class=interactive", "gpu", "interactive"},
		{"", "gpu", "gpu"},
		{"strata:serve=llm", "serve", "serve"},
	} {
		if got := className(slurmrest.Job{Comment: tc.comment, Partition: tc.partition}); got != tc.want {
			t.Errorf("className(%q, %q) = %q, want %q", tc.comment, tc.partition, got, tc.want)
		}
	}
}
