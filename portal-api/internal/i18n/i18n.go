// Package i18n holds every string of the portal's pages in English and
// Korean, in one catalogue (golang.org/x/text/message/catalog), and picks
// the language of a request: the user's stored choice, else the
// browser's Accept-Language, else English.
//
// A key missing in either language, or used by a template and missing in
// the catalogue, fails TestCatalogueComplete and the web package's
// template test.
package i18n

import (
	"fmt"
	"sort"

	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"golang.org/x/text/message/catalog"
)

// Supported are the pages' languages, the first the fallback.
var Supported = []language.Tag{language.English, language.Korean}

var (
	cat     = build()
	matcher = language.NewMatcher(Supported)
)

func build() *catalog.Builder {
	b := catalog.NewBuilder(catalog.Fallback(language.English))
	for tag, msgs := range map[language.Tag]map[string]string{language.English: en, language.Korean: ko} {
		for k, v := range msgs {
			if err := b.SetString(tag, k, v); err != nil {
				panic(fmt.Sprintf("i18n: message %q: %v", k, err))
			}
		}
	}
	return b
}

// L speaks one language.
type L struct {
	tag language.Tag
	p   *message.Printer
}

// For returns the L of a language: the stored choice wins over the
// browser's Accept-Language header; anything else is English.
func For(choice, acceptLanguage string) L {
	tag, _ := language.MatchStrings(matcher, choice, acceptLanguage)
	base, _ := tag.Base()
	for _, t := range Supported {
		if b, _ := t.Base(); b == base {
			tag = t
		}
	}
	if b, _ := tag.Base(); b.String() != "en" && b.String() != "ko" {
		tag = language.English
	}
	return L{tag: tag, p: message.NewPrinter(tag, message.Catalog(cat))}
}

// Lang is the language's BCP 47 code, for <html lang>.
func (l L) Lang() string {
	b, _ := l.tag.Base()
	return b.String()
}

// T is the message of key, with args put in its verbs (%s, %d, %v).
func (l L) T(key string, args ...any) string {
	if l.p == nil {
		l = For("", "")
	}
	return l.p.Sprintf(key, args...)
}

// Has reports whether the catalogue holds key in every language.
func Has(key string) bool {
	_, e := en[key]
	_, k := ko[key]
	return e && k
}

// Keys lists the keys of a language's messages ("en" or "ko"), sorted.
func Keys(lang string) []string {
	m := en
	if lang == "ko" {
		m = ko
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
