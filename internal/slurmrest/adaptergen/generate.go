package adaptergen

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/strata-hpc/strata/internal/slurmrest/specprep"
)

// Generate writes under dir, package slurmrest's directory, everything
// derived for parsers: each prepared spec (from the captured one, by
// specprep), each client (by the oapi-codegen at oapiCodegen) and the files
// of Files.
func Generate(ctx context.Context, dir, oapiCodegen string, parsers []Parser) error {
	if _, err := lookTool(oapiCodegen); err != nil { // before anything is written
		return err
	}
	files, err := Files(parsers)
	if err != nil {
		return err
	}
	for _, p := range parsers {
		spec, err := Spec(dir, p)
		if err != nil {
			return err
		}
		files = append(files, File{Path: p.Spec(), Data: spec})
	}
	for _, f := range files {
		if err := write(dir, f); err != nil {
			return err
		}
	}
	for _, p := range parsers { // after the specs they are generated from
		src, err := Client(ctx, oapiCodegen, dir, p)
		if err != nil {
			return err
		}
		if err := write(dir, File{Path: p.Client(), Data: src}); err != nil {
			return err
		}
	}
	return nil
}

// Spec prepares the parser's captured spec under dir for oapi-codegen.
func Spec(dir string, p Parser) ([]byte, error) {
	name := filepath.Join(dir, filepath.FromSlash(p.Raw()))
	raw, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("adaptergen: captured spec of %s (make capture-slurmrest): %w", p.Version, err)
	}
	spec, err := specprep.Prepare(raw, p.Version)
	if err != nil {
		return nil, fmt.Errorf("adaptergen: %s: %w", name, err)
	}
	return spec, nil
}

// Client runs the oapi-codegen at tool on the parser's prepared spec under
// dir, in a directory of its own, and returns the client it generates.
func Client(ctx context.Context, tool, dir string, p Parser) ([]byte, error) {
	tool, err := lookTool(tool)
	if err != nil {
		return nil, err
	}
	spec, err := filepath.Abs(filepath.Join(dir, filepath.FromSlash(p.Spec())))
	if err != nil {
		return nil, fmt.Errorf("adaptergen: %w", err)
	}
	cfg, err := render("oapi-codegen.yaml.tmpl", p)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "adaptergen-")
	if err != nil {
		return nil, fmt.Errorf("adaptergen: %w", err)
	}
	defer func() { _ = os.RemoveAll(tmp) }() // a temporary directory: nothing to do if it stays
	if err := os.WriteFile(filepath.Join(tmp, "oapi-codegen.yaml"), cfg, 0o644); err != nil {
		return nil, fmt.Errorf("adaptergen: %w", err)
	}
	cmd := exec.CommandContext(ctx, tool, "-config", "oapi-codegen.yaml", spec)
	cmd.Dir = tmp
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("adaptergen: oapi-codegen on %s: %w\n%s", p.Spec(), err, out.Bytes())
	}
	src, err := os.ReadFile(filepath.Join(tmp, p.Package()+".gen.go"))
	if err != nil {
		return nil, fmt.Errorf("adaptergen: oapi-codegen on %s: %w", p.Spec(), err)
	}
	return src, nil
}

// lookTool returns the absolute path of the oapi-codegen to run: it runs in
// a directory of its own.
func lookTool(tool string) (string, error) {
	if tool == "" {
		return "", fmt.Errorf("adaptergen: no oapi-codegen given (make generate-slurmrest passes the pinned one)")
	}
	var err error
	if strings.ContainsRune(tool, filepath.Separator) {
		tool, err = filepath.Abs(tool)
		if err == nil {
			_, err = os.Stat(tool)
		}
	} else {
		tool, err = exec.LookPath(tool)
	}
	if err != nil {
		return "", fmt.Errorf("adaptergen: oapi-codegen: %w", err)
	}
	return tool, nil
}

func write(dir string, f File) error {
	name := filepath.Join(dir, filepath.FromSlash(f.Path))
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return fmt.Errorf("adaptergen: %w", err)
	}
	if err := os.WriteFile(name, f.Data, 0o644); err != nil {
		return fmt.Errorf("adaptergen: %w", err)
	}
	return nil
}
