package web

import (
	"strings"

	"github.com/strata-hpc/strata/portal-api/internal/api"
	"github.com/strata-hpc/strata/portal-api/internal/i18n"
)

// refusalArgs are the facts each rule's sentence takes, in its order
// (the catalogue's "refusal.<rule>").
var refusalArgs = map[string][]string{
	"member":            {"user", "owner"},
	"viewer":            {"user", "owner"},
	"no_default_class":  {"allowed"},
	"unknown_class":     {"class", "allowed"},
	"class_not_allowed": {"owner", "class", "allowed"},
	"qos":               {"class", "item"},
	"partition":         {"class", "allowed", "item"},
	"time_limit":        {"class", "limit", "asked"},
	"gpu_count":         {"limit", "asked"},
	"class_gpus":        {"class", "limit", "asked"},
	"gpus":              {"owner", "limit", "asked"},
	"gpu_type_denied":   {"owner", "item"},
	"gpu_type":          {"owner", "limit", "item", "asked"},
	"whole_nodes":       {"class"},
	"container":         {"item", "owner"},
	"no_images":         {"owner", "item"},
	"image":             {"owner", "item", "allowed"},
}

// refusalText is the policy's refusal in the page's language, from its
// fields; "" for a rule the catalogue does not know or a fact missing
// (the page then shows the policy's own English message).
func refusalText(l i18n.L, r *api.PolicyRefusal) string {
	if r == nil {
		return ""
	}
	names, ok := refusalArgs[r.Rule]
	key := "refusal." + r.Rule
	if !ok || !i18n.Has(key) {
		return ""
	}
	facts := map[string]*string{"owner": r.Owner, "user": r.User, "class": r.Class, "limit": r.Limit, "asked": r.Asked,
		"item": r.Item, "allowed": r.Allowed}
	args := make([]any, 0, len(names))
	for _, n := range names {
		v := facts[n]
		if v == nil || *v == "" {
			return ""
		}
		s := *v
		if n == "owner" {
			s = owner(l, s)
		}
		args = append(args, s)
	}
	return l.T(key, args...)
}

// owner is a limit's owner ("account acme-llm", "tenant acme") in the
// page's language: its kind by the catalogue, its name as it is.
func owner(l i18n.L, s string) string {
	kind, name, ok := strings.Cut(s, " ")
	if !ok {
		return s
	}
	return word(l, "kind", kind) + " " + name
}
