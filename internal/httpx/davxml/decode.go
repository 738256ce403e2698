package davxml

import (
	"bufio"
	"encoding/xml"
	"io"
	"sync"
)

// Decode reads one multistatus document from r, at most limit bytes of
// it.
//
// It gives what (*xml.Decoder).Decode into a Multistatus gave, and fails
// where that failed: the first element, whatever its name, is the
// multistatus, and nothing after its end is read. The tests hold it to
// that decoder, kept as their reference. It walks encoding/xml's tokens
// rather than reflecting over the struct tags, and takes them from
// RawToken rather than Token: Token copies every element to translate
// its prefix and checks that each end element matches its start, where
// Decode needs the name space only of the few names it matches in DAV:
// (response, href, status, propstat) and checks the ends itself.
func Decode(r io.Reader, limit int64) (*Multistatus, error) {
	br := readers.Get().(*bufio.Reader)
	br.Reset(io.LimitReader(r, limit))
	defer func() {
		br.Reset(nil)
		readers.Put(br)
	}()
	p := parser{d: xml.NewDecoder(br), ms: new(Multistatus)}
	if err := p.run(); err != nil {
		return nil, err
	}
	return p.ms, nil
}

// readers are the buffers Decode reads through: the size of the one
// xml.NewDecoder would make, so that as much of r is read.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4096) }}

// What an open element is to the parser: where its children go.
const (
	inNothing      = iota // no element yet: the parent of the document element
	inMultistatus         // the document element
	inResponse            // DAV:response
	inPropstat            // DAV:propstat
	inProp                // prop (any name space)
	inResourceType        // resourcetype (any name space)
	inText                // a string field: p.text
	inSkip                // nothing read from it
)

// open is an element begun and not yet ended.
type open struct {
	name xml.Name // as written: prefix in Space
	nns  int      // len(parser.ns) before its own declarations
	role uint8
}

// binding is a name space declaration in scope (xmlns:prefix="url", or
// xmlns="url" for the prefix "").
type binding struct {
	prefix, url string
	prev        int // in map mode: the binding of prefix it hides, or -1
}

// mapAfter is how many bindings in scope make the parser look prefixes
// up in a map rather than walk them: a document declaring thousands
// costs no more per element than one declaring a few.
const mapAfter = 32

// parser reads tokens into ms.
type parser struct {
	d     *xml.Decoder
	ms    *Multistatus
	stack []open
	ns    []binding
	nsMap map[string]int // prefix: index in ns of its innermost binding; nil until len(ns) > mapAfter
	text  *string        // the string field the inText element fills
	buf   []byte         // its character data so far
}

// run reads the document element, as (*xml.Decoder).Decode would.
func (p *parser) run() error {
	for {
		tok, err := p.d.RawToken()
		if tok == nil {
			if err == nil {
				continue
			}
			if err == io.EOF && len(p.stack) > 0 {
				err = p.syntaxError("unexpected EOF")
			}
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			p.start(&t)
		case xml.EndElement:
			if err := p.end(&t); err != nil {
				return err
			}
			if len(p.stack) == 0 {
				return nil
			}
		case xml.CharData:
			if len(p.stack) > 0 && p.stack[len(p.stack)-1].role == inText {
				p.buf = append(p.buf, t...)
			}
		}
	}
}

// start opens the element t: as a field of its parent's, or skipped.
func (p *parser) start(t *xml.StartElement) {
	nns := len(p.ns)
	role, parent := uint8(inSkip), uint8(inNothing)
	if len(p.stack) > 0 {
		parent = p.stack[len(p.stack)-1].role
	}
	switch parent {
	case inNothing:
		p.declare(t.Attr)
		role = inMultistatus
	case inMultistatus:
		p.declare(t.Attr)
		if t.Name.Local == "response" && p.inDAV(t.Name.Space) {
			p.ms.Responses = append(p.ms.Responses, Response{})
			role = inResponse
		}
	case inResponse:
		p.declare(t.Attr)
		r := &p.ms.Responses[len(p.ms.Responses)-1]
		switch t.Name.Local {
		case "href":
			role = p.textIf(&r.Href, t.Name.Space)
		case "status":
			role = p.textIf(&r.Status, t.Name.Space)
		case "propstat":
			if p.inDAV(t.Name.Space) {
				r.Propstats = append(r.Propstats, Propstat{})
				role = inPropstat
			}
		}
	case inPropstat:
		ps := p.propstat()
		switch t.Name.Local {
		case "status":
			p.declare(t.Attr)
			role = p.textIf(&ps.Status, t.Name.Space)
		case "prop":
			role = inProp
		}
	case inProp:
		pr := &p.propstat().Prop
		switch t.Name.Local {
		case "resourcetype":
			if pr.ResourceType == nil {
				pr.ResourceType = new(struct {
					Collection *struct{} `xml:"collection"`
				})
			}
			role = inResourceType
		case "getcontentlength":
			role = p.textOf(&pr.ContentLength)
		case "getlastmodified":
			role = p.textOf(&pr.LastModified)
		case "getetag":
			role = p.textOf(&pr.ETag)
		case "iscollection":
			role = p.textOf(&pr.IsCollection)
		case "quota-available-bytes":
			role = p.textOf(&pr.QuotaAvailable)
		case "quota-used-bytes":
			role = p.textOf(&pr.QuotaUsed)
		}
	case inResourceType:
		if t.Name.Local == "collection" {
			if rt := p.propstat().Prop.ResourceType; rt.Collection == nil {
				rt.Collection = &struct{}{}
			}
		}
	}
	p.stack = append(p.stack, open{name: t.Name, nns: nns, role: role})
}

// propstat is the DAV:propstat being read.
func (p *parser) propstat() *Propstat {
	r := &p.ms.Responses[len(p.ms.Responses)-1]
	return &r.Propstats[len(r.Propstats)-1]
}

// textIf is textOf(s) for an element in the name space of the prefix
// space when that is DAV:, inSkip otherwise.
func (p *parser) textIf(s *string, space string) uint8 {
	if !p.inDAV(space) {
		return inSkip
	}
	return p.textOf(s)
}

// textOf begins reading the character data of an element into s.
func (p *parser) textOf(s *string) uint8 {
	p.text = s
	p.buf = p.buf[:0]
	return inText
}

// end closes the innermost open element with t, which must name it as
// its start did, as Token requires.
func (p *parser) end(t *xml.EndElement) error {
	if len(p.stack) == 0 {
		return p.syntaxError("unexpected end element </" + t.Name.Local + ">")
	}
	o := &p.stack[len(p.stack)-1]
	switch {
	case o.name.Local != t.Name.Local:
		return p.syntaxError("element <" + o.name.Local + "> closed by </" + t.Name.Local + ">")
	case o.name.Space != t.Name.Space:
		ns := t.Name.Space
		if ns == "" {
			ns = `""`
		}
		return p.syntaxError("element <" + o.name.Local + "> in space " + o.name.Space +
			" closed by </" + t.Name.Local + "> in space " + ns)
	}
	if o.role == inText {
		// A string field takes the data of its last element, all of
		// it: the pieces between comments, CDATA sections and skipped
		// children.
		*p.text = string(p.buf)
	}
	p.undeclare(o.nns)
	p.stack = p.stack[:len(p.stack)-1]
	return nil
}

// syntaxError is the error Token gives for msg at this point.
func (p *parser) syntaxError(msg string) error {
	line, _ := p.d.InputPos()
	return &xml.SyntaxError{Msg: msg, Line: line}
}

// declare brings into scope the name space declarations among attrs.
func (p *parser) declare(attrs []xml.Attr) {
	for i := range attrs {
		a := &attrs[i]
		switch {
		case a.Name.Space == "xmlns":
			p.bind(a.Name.Local, a.Value)
		case a.Name.Space == "" && a.Name.Local == "xmlns":
			p.bind("", a.Value)
		}
	}
}

func (p *parser) bind(prefix, url string) {
	p.ns = append(p.ns, binding{prefix: prefix, url: url, prev: -1})
	switch {
	case p.nsMap != nil:
		p.mapBinding(len(p.ns) - 1)
	case len(p.ns) > mapAfter:
		p.nsMap = make(map[string]int, len(p.ns))
		for i := range p.ns {
			p.mapBinding(i)
		}
	}
}

// mapBinding makes ns[i] the binding of its prefix in nsMap.
func (p *parser) mapBinding(i int) {
	b := &p.ns[i]
	if j, ok := p.nsMap[b.prefix]; ok {
		b.prev = j
	}
	p.nsMap[b.prefix] = i
}

// undeclare takes out of scope the bindings from ns[n] on.
func (p *parser) undeclare(n int) {
	if p.nsMap != nil {
		for i := len(p.ns) - 1; i >= n; i-- {
			if b := &p.ns[i]; b.prev >= 0 {
				p.nsMap[b.prefix] = b.prev
			} else {
				delete(p.nsMap, b.prefix)
			}
		}
	}
	clear(p.ns[n:])
	p.ns = p.ns[:n]
}

// inDAV reports whether an element name with the prefix space is in the
// DAV: name space, as Token translates element names.
func (p *parser) inDAV(space string) bool {
	switch space {
	case "xmlns", "xml":
		// Token leaves xmlns as it is and gives xml its own URL.
		return false
	}
	if p.nsMap != nil {
		if i, ok := p.nsMap[space]; ok {
			return p.ns[i].url == "DAV:"
		}
		return false // the prefix itself, or the empty default
	}
	for i := len(p.ns) - 1; i >= 0; i-- {
		if p.ns[i].prefix == space {
			return p.ns[i].url == "DAV:"
		}
	}
	return false
}
