// Package fieldcheck holds the field validators that several parts'
// configurations share (a URL that HTTP clients will be given), so that a
// value is judged the same wherever it appears and check-config judges it
// as the daemon would use it. Each returns nil or an error whose text
// follows the field's path in a diagnostic ("slurm.url: <error>").
package fieldcheck

import (
	"fmt"
	"net/url"
	"strings"
)

// HTTPURL accepts an absolute http:// or https:// URL with a host and no
// user information (a password in a config file would end up in logs and
// error messages: credentials go in the token files). Anything else
// (file://, a bare host:port, a relative path) fails at the daemon's first
// request, hours later, or reads what it should not.
func HTTPURL(value string) error {
	u, err := url.Parse(value)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "":
		return fmt.Errorf("%q is not an http:// or https:// URL", value)
	case u.User != nil:
		return fmt.Errorf("%q holds user information: give credentials in the token file, not in the URL", redact(u))
	case strings.HasPrefix(u.Host, ":") || u.Hostname() == "":
		return fmt.Errorf("%q has no host name", value)
	}
	return nil
}

// redact writes u without its user information, which may be a password.
func redact(u *url.URL) string { return u.Scheme + "://…@" + u.Host + u.EscapedPath() }
