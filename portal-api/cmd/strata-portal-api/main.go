// Command strata-portal-api is the one API a web portal builds on, over
// every cluster of a site. `strata-portal-api serve` is the daemon; the
// other verbs are for admins: check-config, and token create, list and
// revoke for personal API tokens.
package main

import "github.com/strata-hpc/strata/internal/cliexit"

func main() { cliexit.Main("strata-portal-api", run) }
