package web

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/strata-hpc/strata/portal-api/internal/i18n"
)

// Page is what every template is given: the language, the signed-in user,
// the user's theme, and the page's own Data.
type Page struct {
	L i18n.L
	// LangChoice and Theme are the user's stored choices ("" : the
	// browser's and the system's).
	LangChoice, Theme string
	User              string
	// TitleKey is the catalogue key of the page's title.
	TitleKey string
	// Nav names the navigation entry of the page.
	Nav string
	// Path is the page's own path, where a preference form returns.
	Path string
	Data any
}

// Renderer holds every page parsed at start, each with the layout.
type Renderer struct {
	pages map[string]*template.Template
}

// funcs are the templates' helpers; none builds HTML from strings.
var funcs = template.FuncMap{
	// num writes an optional number, rounded to a tenth; "–" when absent.
	"num": func(p *float64) string {
		if p == nil {
			return "–"
		}
		return strconv.FormatFloat(math.Round(*p*10)/10, 'f', -1, 64)
	},
	// when writes an optional time in UTC; "–" when absent.
	"when": when,
	// elapsed writes seconds as h:mm.
	"elapsed": elapsed,
	// hours writes GPU-hours to two decimals.
	"hours": func(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) },
	"pct": func(part, whole float64) float64 {
		if whole <= 0 {
			return 0
		}
		return 100 * part / whole
	},
}

// ParseTemplates parses layout.html and the shared parts (_*.html) with
// every other page of fsys (a folder of *.html): a template that does not
// parse stops the start.
func ParseTemplates(fsys fs.FS) (*Renderer, error) {
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(fsys, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("parse the page layout: %w", err)
	}
	// Parts that several pages share (_*.html) go with the layout.
	if parts, _ := fs.Glob(fsys, "templates/_*.html"); len(parts) > 0 {
		if base, err = base.ParseFS(fsys, parts...); err != nil {
			return nil, fmt.Errorf("parse the pages' shared parts: %w", err)
		}
	}
	files, err := fs.Glob(fsys, "templates/*.html")
	if err != nil {
		return nil, err
	}
	r := &Renderer{pages: map[string]*template.Template{}}
	for _, f := range files {
		name := strings.TrimSuffix(path.Base(f), ".html")
		if name == "layout" || strings.HasPrefix(name, "_") {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(fsys, f)
		if err != nil {
			return nil, fmt.Errorf("parse page %s: %w", f, err)
		}
		r.pages[name] = t
	}
	return r, nil
}

// Names lists the pages.
func (r *Renderer) Names() []string {
	var names []string
	for n := range r.pages {
		names = append(names, n)
	}
	return names
}

// Render writes page name whole, or an error before any byte: a page
// that fails halfway is never sent.
func (r *Renderer) Render(w http.ResponseWriter, code int, name string, p Page) error {
	return r.render(w, code, name, "layout", p)
}

// Fragment writes one named template of a page without the layout: what
// a page refreshing in place asks for.
func (r *Renderer) Fragment(w http.ResponseWriter, name, fragment string, p Page) error {
	return r.render(w, http.StatusOK, name, fragment, p)
}

func (r *Renderer) render(w http.ResponseWriter, code int, name, tmpl string, p Page) error {
	t, ok := r.pages[name]
	if !ok {
		return fmt.Errorf("no page %q", name)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, tmpl, p); err != nil {
		return fmt.Errorf("render page %s: %w", name, err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, err := w.Write(buf.Bytes())
	return err
}
