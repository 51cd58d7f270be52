package session

import (
	"strings"
	"testing"
)

// FuzzParse: whatever the bytes, Parse either returns a connection that
// passes its own rules or an error that quotes nothing of the input past
// the field names. Seeded from TestParse's files.
func FuzzParse(f *testing.F) {
	for _, s := range []string{file("jupyterlab", "gpu01", 41234, secret), file("ttyd", "gpu01", 22, secret), file("code-server", "a", 65535, secret),
		"", "{", "[]", `{"version":1}`, file("ttyd", "gpu01", 2000, "") + "{}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			// A secret-like run of the input (8 bytes, not a field name
			// or a word of the messages) must not come back.
			msg := err.Error()
			in := string(data)
			for i := 0; i+12 <= len(in); i++ {
				w := in[i : i+12]
				if strings.Contains(msg, w) && !strings.Contains(parseMessages, w) {
					t.Fatalf("error %q quotes the input %q", msg, w)
				}
			}
			return
		}
		if c.Version != Version || c.Port < 1024 || c.Port > 65535 || !validHost(c.Host) || len(c.Secret) < minSecret {
			t.Fatalf("accepted an invalid connection: %+v", c)
		}
	})
}

// parseMessages holds every fixed text an error of Parse may contain.
var parseMessages = ErrFormat.Error() + ErrNoSecret.Error() +
	"invalid JSON at byte the file is empty or ends too early data after the JSON object " +
	"an unknown field: want version, kind, host, port, secret and started only " +
	"version: want 1; kind: want jupyterlab, ttyd or code-server; host: want the node's name; " +
	"port: want an unprivileged port, 1024 to 65535; started: want the server's start time, RFC 3339; " +
	"started: want an RFC 3339 time not a JSON object of the connection file's fields " +
	"want at least 32 printable characters, no space version kind host port secret started Version Kind Host Port Secret Started " +
	"int string time.Time session.Kind"
