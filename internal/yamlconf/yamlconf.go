// Package yamlconf is how every Strata daemon reads its YAML config:
// strictly (an unknown or misspelt key is an error with its line), over
// defaults set in code, with an empty file meaning the defaults, and with
// every validation problem reported at once, each prefixed by the file.
package yamlconf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Decode decodes data into dst, which holds the defaults, then runs
// validate and joins its problems into one error, one per line.
func Decode(name string, data []byte, dst any, validate func() []error) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	// An empty or all-comment file has no document (io.EOF): the defaults
	// apply, as with no file at all.
	if err := dec.Decode(dst); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: %s", name, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if validate == nil {
		return nil
	}
	errs := validate()
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = name + ": " + e.Error()
	}
	return errors.New(strings.Join(msgs, "\n"))
}
