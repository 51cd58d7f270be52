// Package web holds the portal's page templates and static assets,
// embedded in the binary: nothing is fetched from another host, and
// go build needs no Node step. The handlers are in
// portal-api/internal/web.
package web

import "embed"

// Templates are the pages (html/template), one file each, and the layout
// they share.
//
//go:embed templates/*.html
var Templates embed.FS

// Static is served under /static/: the stylesheet, the product's script,
// and htmx (htmx.version records its release and SHA-256).
//
//go:embed static
var Static embed.FS
