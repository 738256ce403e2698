// Package docs holds the tests of lakefed's documentation: README.md and
// the pages of this directory. They keep the README short, every relative
// link and #anchor pointing at a file and a heading that exist (by
// GitHub's rule for heading anchors), the pages free of development
// history, and roles.svg well-formed.
//
//	go test ./docs/
package docs

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// readmeMaxLines is the README's bound: it must fit on two screens.
const readmeMaxLines = 150

// pages returns README.md and docs/*.md, relative to the repository root.
func pages(t *testing.T, root string) []string {
	t.Helper()
	ps := []string{"README.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range more {
		rel, err := filepath.Rel(root, p)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, filepath.ToSlash(rel))
	}
	return ps
}

func TestREADMELength(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "\n"); n >= readmeMaxLines {
		t.Errorf("README.md has %d lines, want fewer than %d: move detail into docs/", n, readmeMaxLines)
	}
}

func TestLinks(t *testing.T) {
	ps := pages(t, "..")
	if len(ps) < 5 {
		t.Fatalf("found %d pages (%v); the glob is broken", len(ps), ps)
	}
	for _, p := range checkLinks("..", ps) {
		t.Error(p)
	}
}

// TestLinkCheckerFails: the checker finds a missing file, a missing
// anchor in another page and in its own, a link out of the tree, and
// passes the links that are right.
func TestLinkCheckerFails(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# Top\n\n"+
		"[ok](docs/a.md) [ok](docs/a.md#the-root-door) [ok](#top) [ok](docs/)\n"+
		"[bad file](docs/missing.md)\n"+
		"[bad anchor](docs/a.md#nowhere)\n"+
		"[bad here](#bottom)\n"+
		"[out](../../etc/passwd)\n"+
		"[web](https://example.org/x.md) [mail](mailto:a@example.org)\n"+
		"`[in code](nothing.md)`\n\n"+
		"    [indented code](nothing-either.md)\n")
	write("docs/a.md", "## The root:// door\n\n```\n[fenced](gone.md)\n## Not a heading\n```\n"+
		"[ok](../README.md#top) [bad](a.md#not-a-heading)\n")

	problems := checkLinks(dir, []string{"README.md", "docs/a.md"})
	want := []string{
		"README.md: link docs/missing.md:",
		"README.md: link docs/a.md#nowhere: no heading",
		"README.md: link #bottom: no heading",
		"README.md: link ../../etc/passwd: outside the repository",
		"docs/a.md: link a.md#not-a-heading: no heading",
	}
	if len(problems) != len(want) {
		t.Errorf("checkLinks found %d problems, want %d:\n%s", len(problems), len(want), strings.Join(problems, "\n"))
	}
	for _, w := range want {
		found := false
		for _, p := range problems {
			found = found || strings.HasPrefix(p, w)
		}
		if !found {
			t.Errorf("checkLinks did not report %q; it reported:\n%s", w, strings.Join(problems, "\n"))
		}
	}
}

// TestAnchor checks the heading-anchor rule against anchors GitHub makes.
func TestAnchor(t *testing.T) {
	tests := []struct {
		name    string
		heading string
		want    string
	}{
		{"words", "Quick start", "quick-start"},
		{"scheme punctuation", "The root:// door", "the-root-door"},
		{"code span", "`federation.endpoints[].url`", "federationendpointsurl"},
		{"underscore kept", "log_format: text|json", "log_format-textjson"},
		{"hyphen kept, dash dropped", "Read-your-writes — across roles", "read-your-writes--across-roles"},
		{"digits and symbols", "C++ & Go (v1.26)", "c--go-v126"},
		{"link text", "See [the cache](cache.md) now", "see-the-cache-now"},
		{"letters beyond ASCII", "Über café", "über-café"},
		{"emphasis", "**Bold** and *it*", "bold-and-it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := newSlugger().slug(tt.heading); got != tt.want {
				t.Errorf("slug(%q) = %q, want %q", tt.heading, got, tt.want)
			}
		})
	}
	t.Run("duplicates", func(t *testing.T) {
		s := newSlugger()
		var got []string
		for _, h := range []string{"Figures", "Figures", "Figures-1", "Figures"} {
			got = append(got, s.slug(h))
		}
		want := "figures figures-1 figures-1-1 figures-2"
		if strings.Join(got, " ") != want {
			t.Errorf("slugs = %q, want %q", strings.Join(got, " "), want)
		}
	})
}

// history are phrases that belong in commit messages, not in the docs.
var history = regexp.MustCompile(`(?i)\b(issues?\s+#?\d+|wave\s+\d)`)

func TestNoHistory(t *testing.T) {
	for _, p := range pages(t, "..") {
		b, err := os.ReadFile(filepath.Join("..", p))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if m := history.FindString(line); m != "" {
				t.Errorf("%s:%d: %q: name things by what they are, not by their history", p, i+1, m)
			}
		}
	}
}

func TestNoHistoryMatches(t *testing.T) {
	for _, s := range []string{"see issue 12", "Issue #7", "issues 1764", "wave 2", "WAVE 3"} {
		if !history.MatchString(s) {
			t.Errorf("history does not match %q", s)
		}
	}
	for _, s := range []string{"an issue with ranges", "waves of 10 jobs", "microwave 2"} {
		if history.MatchString(s) {
			t.Errorf("history matches %q", s)
		}
	}
}

func TestRolesSVG(t *testing.T) {
	f, err := os.Open("roles.svg")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := checkSVG(f); err != nil {
		t.Error(err)
	}
}

func TestCheckSVGFails(t *testing.T) {
	tests := []struct{ name, doc string }{
		{"not xml", `<svg viewBox="0 0 1 1"><g></svg>`},
		{"other root", `<html viewBox="0 0 1 1"></html>`},
		{"no viewBox", `<svg xmlns="http://www.w3.org/2000/svg"></svg>`},
		{"script", `<svg viewBox="0 0 1 1"><script>alert(1)</script></svg>`},
		{"external font", `<svg viewBox="0 0 1 1"><style>@import url(https://fonts.example.org/x.css);</style></svg>`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := checkSVG(strings.NewReader(tt.doc)); err == nil {
				t.Errorf("checkSVG(%q) = nil, want an error", tt.doc)
			}
		})
	}
	if err := checkSVG(strings.NewReader(`<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 1 1"><text>a</text></svg>`)); err != nil {
		t.Errorf("checkSVG(a good one) = %v", err)
	}
}

// checkSVG reports whether r is a well-formed XML document whose root is
// <svg> with a viewBox, and which loads nothing from elsewhere (no
// script, no imported stylesheet or font).
func checkSVG(r io.Reader) error {
	d := xml.NewDecoder(r)
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("svg: %w", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if root == "" {
				root = tok.Name.Local
				if root != "svg" {
					return fmt.Errorf("svg: root element is <%s>, want <svg>", root)
				}
				has := false
				for _, a := range tok.Attr {
					has = has || a.Name.Local == "viewBox" && a.Value != ""
				}
				if !has {
					return errors.New("svg: the <svg> element has no viewBox")
				}
			}
			if tok.Name.Local == "script" || tok.Name.Local == "foreignObject" {
				return fmt.Errorf("svg: <%s> element", tok.Name.Local)
			}
		case xml.CharData:
			if s := string(tok); strings.Contains(s, "@import") || strings.Contains(s, "@font-face") {
				return errors.New("svg: loads a stylesheet or font from elsewhere")
			}
		}
	}
	if root == "" {
		return errors.New("svg: no root element")
	}
	return nil
}

// checkLinks checks every relative link of the pages (paths relative to
// root, slash-separated): the file or directory it names exists inside
// root, and its #anchor is a heading of the Markdown page it names (or of
// its own page). Links with a scheme (https:, mailto:) are not checked.
func checkLinks(root string, pages []string) (problems []string) {
	anchors := map[string]map[string]bool{} // page → its anchors
	anchorsOf := func(page string) (map[string]bool, error) {
		if a, ok := anchors[page]; ok {
			return a, nil
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(page)))
		if err != nil {
			return nil, err
		}
		a := map[string]bool{}
		s := newSlugger()
		for _, h := range headings(string(b)) {
			a[s.slug(h)] = true
		}
		anchors[page] = a
		return a, nil
	}
	for _, page := range pages {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(page)))
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", page, err))
			continue
		}
		for _, link := range links(string(b)) {
			bad := func(format string, a ...any) {
				problems = append(problems, fmt.Sprintf("%s: link %s: ", page, link)+fmt.Sprintf(format, a...))
			}
			if hasScheme.MatchString(link) {
				continue
			}
			target, anchor, _ := strings.Cut(link, "#")
			target, err := url.PathUnescape(target)
			if err != nil {
				bad("%v", err)
				continue
			}
			dest := page // the page the link leads to
			if target != "" {
				dest = filepath.ToSlash(filepath.Clean(filepath.Join(filepath.Dir(page), target)))
				if dest == ".." || strings.HasPrefix(dest, "../") || filepath.IsAbs(target) {
					bad("outside the repository")
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dest))); err != nil {
					bad("%v", err)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(dest, ".md") {
				bad("an anchor into a file that is not Markdown")
				continue
			}
			a, err := anchorsOf(dest)
			if err != nil {
				bad("%v", err)
				continue
			}
			if !a[anchor] {
				bad("no heading of %s has the anchor #%s", dest, anchor)
			}
		}
	}
	return problems
}

var (
	// hasScheme matches a link with a URL scheme (https:, mailto:).
	hasScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)
	// inlineLink matches [text](target "title") and ![alt](target).
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)`)
	// refDef matches a reference definition: [name]: target
	refDef = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$`)
	// atxHeading matches "## text ##".
	atxHeading = regexp.MustCompile(`^ {0,3}#{1,6}(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$`)
	// fence opens or closes a fenced code block.
	fence = regexp.MustCompile("^ {0,3}(```|~~~)")
)

// prose returns the lines of md that are not code: fenced and indented
// code blocks are blanked, and so are code spans within lines.
func prose(md string) []string {
	lines := strings.Split(md, "\n")
	out := make([]string, len(lines))
	inFence, inIndented := "", false
	prevBlank := true
	for i, line := range lines {
		blank := strings.TrimSpace(line) == ""
		switch {
		case inFence != "":
			if m := fence.FindStringSubmatch(line); m != nil && m[1] == inFence {
				inFence = ""
			}
		case fence.MatchString(line):
			inFence = fence.FindStringSubmatch(line)[1]
		case (strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t")) && (prevBlank || inIndented) && !blank:
			inIndented = true
		default:
			if !blank {
				inIndented = false
			}
			out[i] = stripCodeSpans(line)
		}
		prevBlank = blank
	}
	return out
}

// stripCodeSpans removes `code` spans (of any number of backticks) from
// line, keeping their text out of link and heading parsing.
func stripCodeSpans(line string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(line, '`')
		if i < 0 {
			b.WriteString(line)
			return b.String()
		}
		n := i
		for n < len(line) && line[n] == '`' {
			n++
		}
		ticks := line[i:n]
		end := strings.Index(line[n:], ticks)
		if end < 0 {
			b.WriteString(line)
			return b.String()
		}
		b.WriteString(line[:i])
		b.WriteString(" ")
		line = line[n+end+len(ticks):]
	}
}

// links returns the targets of md's inline links, images and reference
// definitions, outside code.
func links(md string) []string {
	var out []string
	for _, line := range prose(md) {
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
		if m := refDef.FindStringSubmatch(line); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

// headings returns the text of md's ATX headings, outside code, as
// written (code spans kept: the anchor is made from their text).
func headings(md string) []string {
	var out []string
	lines := strings.Split(md, "\n")
	for i, p := range prose(md) {
		if p == "" || !atxHeading.MatchString(p) {
			continue
		}
		// Match the raw line again, so that a code span's text counts.
		if m := atxHeading.FindStringSubmatch(lines[i]); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

// slugger makes heading anchors as GitHub does (github-slugger): the
// heading's text, lower-cased, with every character but letters, digits,
// marks, "-", "_" and spaces removed, and each space turned into "-". A
// repeated anchor gets "-1", "-2", ... in the order the headings come.
type slugger struct {
	seen map[string]int // anchor → times its base was repeated
}

func newSlugger() *slugger { return &slugger{seen: map[string]int{}} }

var (
	mdLink  = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTag = regexp.MustCompile(`<[^>]+>`)
)

func (s *slugger) slug(heading string) string {
	text := mdLink.ReplaceAllString(heading, "$1") // a link counts by its text
	text = htmlTag.ReplaceAllString(text, "")
	text = strings.ReplaceAll(text, "`", "")
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	base := b.String()
	slug := base
	for {
		if _, taken := s.seen[slug]; !taken {
			break
		}
		s.seen[base]++
		slug = fmt.Sprintf("%s-%d", base, s.seen[base])
	}
	s.seen[slug] = 0
	return slug
}
