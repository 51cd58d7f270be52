package i18n

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCatalogueComplete fails when a key is in one language and not the
// other, or when the two disagree on the verbs a message takes.
func TestCatalogueComplete(t *testing.T) {
	if d := cmp.Diff(Keys("en"), Keys("ko")); d != "" {
		t.Errorf("the English and Korean keys differ (-en +ko):\n%s", d)
	}
	verbs := regexp.MustCompile(`%%|%(?:\[\d+\])?[-+# 0-9.]*[a-zA-Z]`)
	for k, v := range en {
		if ko[k] == "" || v == "" {
			t.Errorf("%s: empty message", k)
			continue
		}
		a, b := verbs.FindAllString(v, -1), verbs.FindAllString(ko[k], -1)
		slices.Sort(a)
		slices.Sort(b)
		if strings.Join(a, " ") != strings.Join(b, " ") {
			t.Errorf("%s: English takes %v, Korean %v", k, a, b)
		}
	}
}

func TestFor(t *testing.T) {
	tests := map[string]struct {
		choice, accept string
		want           string
	}{
		"nothing":               {want: "en"},
		"korean browser":        {accept: "ko-KR,ko;q=0.9,en;q=0.8", want: "ko"},
		"english first":         {accept: "en-US,ko;q=0.5", want: "en"},
		"unsupported":           {accept: "fr-FR,de", want: "en"},
		"choice wins":           {choice: "ko", accept: "en-US", want: "ko"},
		"choice wins the other": {choice: "en", accept: "ko", want: "en"},
		"korean after french":   {accept: "fr;q=0.9,ko;q=0.8", want: "ko"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := For(tc.choice, tc.accept).Lang(); got != tc.want {
				t.Errorf("For(%q, %q) = %s, want %s", tc.choice, tc.accept, got, tc.want)
			}
		})
	}
	if got := For("ko", "").T("nav.home"); got != ko["nav.home"] {
		t.Errorf("Korean nav.home = %q", got)
	}
	if got, want := For("", "").T("jobs.count", 3), fmt.Sprintf(en["jobs.count"], 3); got != want {
		t.Errorf("with an argument: %q, want %q", got, want)
	}
}
