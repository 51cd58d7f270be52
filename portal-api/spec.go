// Package portalapi holds the portal API's contract, openapi.yaml, for the
// server to serve at /v1/openapi.yaml and for the tests that validate
// every response against it. The server's interface and types are
// generated from the same file into internal/api.
package portalapi

import _ "embed"

// Spec is openapi.yaml.
//
//go:embed openapi.yaml
var Spec []byte
