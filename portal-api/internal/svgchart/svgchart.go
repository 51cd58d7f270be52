// Package svgchart draws a job's GPU utilisation over time as SVG on the
// server: a pure function of its series and labels (no clock, no I/O), so
// the same input gives the same bytes (golden-tested). The SVG is written
// by html/template, so no label or name can become markup; it carries its
// own text alternative (<title>, <desc>, role="img"), and colours come
// from the page's stylesheet through classes, so it follows light and
// dark. Nothing in it is a style attribute or a script.
package svgchart

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// Point is one sample: utilisation in percent at T; NaN is no sample
// (the line breaks there).
type Point struct {
	T time.Time
	V float64
}

// Series is one line: a GPU ("gpu1:0") or the mean.
type Series struct {
	Name   string
	Points []Point
}

// Chart is what to draw.
type Chart struct {
	// ID makes the ids of title and desc unique on the page.
	ID string
	// Title and Desc are the text alternative: what the chart shows, and
	// its numbers in words (the caller writes them in the page's language).
	Title, Desc string
	// Series to draw; the first is drawn boldest (the mean).
	Series []Series
	// Threshold, above 0, draws a dashed line at that percentage (the idle
	// threshold) labelled ThresholdLabel.
	Threshold      float64
	ThresholdLabel string
	// Width and Height of the view box; 0: 640 by 240.
	Width, Height int
}

// Stats are a series' numbers for the text alternative.
type Stats struct {
	Mean, Min, Max float64
	Samples        int
}

// StatsOf sums up a series (NaN samples left out).
func StatsOf(s Series) Stats {
	st := Stats{Min: math.Inf(1), Max: math.Inf(-1)}
	sum := 0.0
	for _, p := range s.Points {
		if math.IsNaN(p.V) {
			continue
		}
		st.Samples++
		sum += p.V
		st.Min = math.Min(st.Min, p.V)
		st.Max = math.Max(st.Max, p.V)
	}
	if st.Samples == 0 {
		return Stats{}
	}
	st.Mean = sum / float64(st.Samples)
	return st
}

const (
	padLeft, padRight, padTop, padBottom = 44, 12, 12, 28
)

type line struct {
	Class  string
	Points []string // one polyline per unbroken run
}

type tick struct {
	X, Y  string
	Label string
}

type view struct {
	Chart
	W, H                  int
	X0, X1, Y0, Y1        string
	Lines                 []line
	YTicks, XTicks        []tick
	ThresholdY            string
	TitleID, DescID       string
	Empty                 bool
	ThresholdLabelX, TLbY string
}

func f(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

// Render draws c.
func Render(c Chart) (template.HTML, error) {
	if c.Width <= 0 || c.Height <= 0 {
		c.Width, c.Height = 640, 240
	}
	v := view{Chart: c, W: c.Width, H: c.Height, TitleID: c.ID + "-title", DescID: c.ID + "-desc"}
	x0, x1 := float64(padLeft), float64(c.Width-padRight)
	y0, y1 := float64(c.Height-padBottom), float64(padTop) // y0: 0 %, y1: 100 %
	v.X0, v.X1, v.Y0, v.Y1 = f(x0), f(x1), f(y0), f(y1)
	var tmin, tmax time.Time
	for _, s := range c.Series {
		for _, p := range s.Points {
			if tmin.IsZero() || p.T.Before(tmin) {
				tmin = p.T
			}
			if p.T.After(tmax) {
				tmax = p.T
			}
		}
	}
	span := tmax.Sub(tmin).Seconds()
	v.Empty = tmin.IsZero()
	xOf := func(t time.Time) float64 {
		if span <= 0 {
			return x0
		}
		return x0 + (x1-x0)*t.Sub(tmin).Seconds()/span
	}
	yOf := func(p float64) float64 { return y0 - (y0-y1)*math.Max(0, math.Min(100, p))/100 }
	for i, s := range c.Series {
		l := line{Class: "line series-" + strconv.Itoa(i)}
		if i == 0 {
			l.Class = "line mean"
		}
		var run []string
		flush := func() {
			if len(run) > 0 {
				l.Points = append(l.Points, strings.Join(run, " "))
			}
			run = nil
		}
		for _, p := range s.Points {
			if math.IsNaN(p.V) {
				flush()
				continue
			}
			run = append(run, f(xOf(p.T))+","+f(yOf(p.V)))
		}
		flush()
		v.Lines = append(v.Lines, l)
	}
	for _, pct := range []float64{0, 25, 50, 75, 100} {
		v.YTicks = append(v.YTicks, tick{X: f(x0 - 6), Y: f(yOf(pct)), Label: strconv.Itoa(int(pct)) + "%"})
	}
	if !v.Empty {
		for i := range 5 {
			t := tmin.Add(time.Duration(float64(i) / 4 * span * float64(time.Second)))
			v.XTicks = append(v.XTicks, tick{X: f(xOf(t)), Y: f(y0 + 18), Label: t.UTC().Format("15:04")})
		}
	}
	if c.Threshold > 0 {
		v.ThresholdY = f(yOf(c.Threshold))
		v.ThresholdLabelX, v.TLbY = f(x1-4), f(yOf(c.Threshold)-4)
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, v); err != nil {
		return "", fmt.Errorf("draw chart: %w", err)
	}
	return template.HTML(buf.String()), nil // written by html/template above: escaped
}

var tmpl = template.Must(template.New("chart").Parse(`<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {{.W}} {{.H}}" role="img" aria-labelledby="{{.TitleID}} {{.DescID}}">
<title id="{{.TitleID}}">{{.Title}}</title>
<desc id="{{.DescID}}">{{.Desc}}</desc>
<g class="grid" aria-hidden="true">
{{- range .YTicks}}
<line class="grid" x1="{{$.X0}}" x2="{{$.X1}}" y1="{{.Y}}" y2="{{.Y}}" stroke-width="1"/>
<text x="{{.X}}" y="{{.Y}}" text-anchor="end" dominant-baseline="middle">{{.Label}}</text>
{{- end}}
{{- range .XTicks}}
<text x="{{.X}}" y="{{.Y}}" text-anchor="middle">{{.Label}}</text>
{{- end}}
</g>
{{- if .ThresholdY}}
<g class="threshold" aria-hidden="true">
<line class="line" x1="{{.X0}}" x2="{{.X1}}" y1="{{.ThresholdY}}" y2="{{.ThresholdY}}" stroke-width="1" stroke-dasharray="4 4"/>
<text x="{{.ThresholdLabelX}}" y="{{.TLbY}}" text-anchor="end">{{.ThresholdLabel}}</text>
</g>
{{- end}}
<g aria-hidden="true" fill="none">
{{- range .Lines}}{{$c := .Class}}{{range .Points}}
<polyline class="{{$c}}" points="{{.}}" stroke-width="{{if eq $c "line mean"}}2.5{{else}}1{{end}}" stroke-linejoin="round"/>
{{- end}}{{end}}
</g>
</svg>`))
