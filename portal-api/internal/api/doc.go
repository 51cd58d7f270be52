// Package api is the portal API's server interface and types, generated
// by oapi-codegen from portal-api/openapi.yaml (make generate-portal):
// a handler that does not implement the contract does not compile.
package api
