package httpx

import (
	"encoding/xml"
	"io"
	"time"
)

// MetalinkType is the media type of a Metalink 4 document (RFC 5854 §4).
const MetalinkType = "application/metalink4+xml"

// MetalinkNS is the Metalink 4 XML namespace.
const MetalinkNS = "urn:ietf:params:xml:ns:metalink"

// Metalink is a Metalink 4 document (RFC 5854): what gfal2, davix and
// aria2 read to learn every replica of a file and fail over between them.
type Metalink struct {
	XMLName   xml.Name       `xml:"urn:ietf:params:xml:ns:metalink metalink"`
	Generator string         `xml:"generator,omitempty"`
	Published string         `xml:"published,omitempty"`
	Files     []MetalinkFile `xml:"file"`
}

// MetalinkFile is one file of a Metalink document.
type MetalinkFile struct {
	// Name is the file's name (RFC 5854 §4.1.2.1: no directory part
	// required; we give the base name).
	Name string `xml:"name,attr"`
	// Size in bytes; omitted when negative is not representable, so
	// callers set it only when known.
	Size   int64          `xml:"size,omitempty"`
	Hashes []MetalinkHash `xml:"hash"`
	URLs   []MetalinkURL  `xml:"url"`
}

// MetalinkHash is a checksum: Type is "adler32", "md5", ... and Value the
// hex digits (RFC 5854 §4.2.4, IANA hash names plus the field's adler32).
type MetalinkHash struct {
	Type  string `xml:"type,attr"`
	Value string `xml:",chardata"`
}

// MetalinkURL is one replica. Priority 1 is the most preferred (RFC 5854
// §4.2.16); Location is an ISO 3166-1 country code when known.
type MetalinkURL struct {
	Priority int    `xml:"priority,attr,omitempty"`
	Location string `xml:"location,attr,omitempty"`
	URL      string `xml:",chardata"`
}

// WriteMetalink writes m as an XML document to w.
func WriteMetalink(w io.Writer, m *Metalink) error {
	if m.Published == "" {
		m.Published = time.Now().UTC().Format(time.RFC3339)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", " ")
	if err := enc.Encode(m); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// ParseMetalink reads a Metalink 4 document.
func ParseMetalink(r io.Reader) (*Metalink, error) {
	var m Metalink
	if err := xml.NewDecoder(r).Decode(&m); err != nil {
		return nil, err
	}
	return &m, nil
}
