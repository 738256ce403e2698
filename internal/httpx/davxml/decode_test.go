package davxml

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/storage"
	"github.com/lakefed/lakefed/internal/storage/storagetest"
)

// decodeReference is what Decode was: encoding/xml's reflection over the
// struct tags of Multistatus. Decode must give what it gives for every
// input, and fail where it fails (FuzzDecode).
func decodeReference(r io.Reader, limit int64) (*Multistatus, error) {
	var ms Multistatus
	if err := xml.NewDecoder(io.LimitReader(r, limit)).Decode(&ms); err != nil {
		return nil, err
	}
	return &ms, nil
}

// storageListing is a real answer of lakefed's storage role to PROPFIND
// Depth 1 with PropfindBody: a directory of n members, about one in ten
// a subdirectory, names with characters href escaping touches.
func storageListing(tb testing.TB, n int) []byte {
	tb.Helper()
	site := storagetest.Start(tb, storage.Config{})
	dir := filepath.Join(site.Dir, "d")
	if err := os.Mkdir(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		name := filepath.Join(dir, memberName(i))
		if i%10 == 9 {
			if err := os.Mkdir(name, 0o755); err != nil {
				tb.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(name, bytes.Repeat([]byte{'x'}, i%97), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	req, err := http.NewRequest("PROPFIND", site.URL+"d/", strings.NewReader(PropfindBody))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Depth", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusMultiStatus {
		tb.Fatalf("PROPFIND = %d, %v", resp.StatusCode, err)
	}
	return body
}

// memberName is the name of the i-th member of a listing fixture.
func memberName(i int) string {
	switch i % 7 {
	case 3:
		return fmt.Sprintf("run %06d & co.root", i)
	case 5:
		return fmt.Sprintf("évt_%06d.root", i)
	}
	return fmt.Sprintf("file_%06d.root", i)
}

// xrdHTTPListing is an answer to PROPFIND Depth 1 of n members as XrdHttp
// (XrdHttpReq.cc, 5.x) writes it: the multistatus, then per member a
// response redeclaring its prefixes, the properties under lp1 (DAV:),
// iscollection and executable, one propstat each, hrefs unescaped.
func xrdHTTPListing(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`<?xml version="1.0" encoding="utf-8"?>` + "\n" +
		`<D:multistatus xmlns:D="DAV:" xmlns:ns1="http://apache.org/dav/props/" xmlns:ns0="DAV:">` + "\n")
	mod := time.Date(2024, 5, 1, 2, 42, 13, 0, time.UTC)
	entry := func(href string, size int, dir bool) {
		b.WriteString(`<D:response xmlns:lp1="DAV:" xmlns:lp2="http://apache.org/dav/props/" xmlns:lp3="LCGDM:">` + "\n")
		b.WriteString("<D:href>")
		_ = xml.EscapeText(&b, []byte(href))
		b.WriteString("</D:href>\n<D:propstat>\n<D:prop>\n")
		fmt.Fprintf(&b, "<lp1:getcontentlength>%d</lp1:getcontentlength>\n", size)
		fmt.Fprintf(&b, "<lp1:getlastmodified>%s</lp1:getlastmodified>\n", mod.Format(http.TimeFormat))
		if dir {
			b.WriteString("<lp1:resourcetype><D:collection/></lp1:resourcetype>\n<lp1:iscollection>1</lp1:iscollection>\n")
		} else {
			b.WriteString("<lp1:iscollection>0</lp1:iscollection>\n")
		}
		b.WriteString("<lp1:executable>F</lp1:executable>\n")
		b.WriteString("</D:prop>\n<D:status>HTTP/1.1 200 OK</D:status>\n</D:propstat>\n</D:response>\n")
		mod = mod.Add(time.Minute)
	}
	entry("/store/d", 4096, true)
	for i := range n {
		entry("/store/d/"+memberName(i), 1<<20+i*4099, i%10 == 9)
	}
	b.WriteString("</D:multistatus>\n")
	return b.Bytes()
}

// BenchmarkDecode decodes Depth 1 listings of 100 and 1000 members as
// lakefed's storage role and XrdHttp write them, with the reference
// decoder and Decode in the same run.
func BenchmarkDecode(b *testing.B) {
	for _, n := range []int{100, 1000} {
		for _, f := range []struct {
			name string
			body func() []byte
		}{
			{"storage", func() []byte { return storageListing(b, n) }},
			{"xrdhttp", func() []byte { return xrdHTTPListing(n) }},
		} {
			body := f.body()
			b.Run(f.name+"/"+strconv.Itoa(n), func(b *testing.B) {
				for _, d := range []struct {
					name   string
					decode func(io.Reader, int64) (*Multistatus, error)
				}{{"reference", decodeReference}, {"new", Decode}} {
					b.Run(d.name, func(b *testing.B) {
						b.SetBytes(int64(len(body)))
						b.ReportAllocs()
						for b.Loop() {
							ms, err := d.decode(bytes.NewReader(body), MaxBody)
							if err != nil {
								b.Fatal(err)
							}
							if len(ms.Responses) != n+1 {
								b.Fatalf("%d responses, want %d", len(ms.Responses), n+1)
							}
						}
					})
				}
			})
		}
	}
}

// Answers as servers write them, for the seeds of FuzzDecode and the
// table of TestDecodeSameAsReference.
const (
	// apacheAnswer is mod_dav's: the live properties under lp1, the
	// ones it does not have in a 404 propstat under g0.
	apacheAnswer = `<?xml version="1.0" encoding="utf-8"?>
<D:multistatus xmlns:D="DAV:" xmlns:ns0="DAV:">
<D:response xmlns:lp1="DAV:" xmlns:lp2="http://apache.org/dav/props/">
<D:href>/dav/</D:href>
<D:propstat>
<D:prop>
<lp1:resourcetype><D:collection/></lp1:resourcetype>
<lp1:getlastmodified>Mon, 01 Jan 2024 00:00:00 GMT</lp1:getlastmodified>
<lp1:getetag>"1000-60dd9b0ef4a40"</lp1:getetag>
</D:prop>
<D:status>HTTP/1.1 200 OK</D:status>
</D:propstat>
<D:propstat>
<D:prop>
<g0:getcontentlength xmlns:g0="DAV:"/>
</D:prop>
<D:status>HTTP/1.1 404 Not Found</D:status>
</D:propstat>
</D:response>
<D:response xmlns:lp1="DAV:" xmlns:lp2="http://apache.org/dav/props/">
<D:href>/dav/a%20file.txt</D:href>
<D:propstat>
<D:prop>
<lp1:resourcetype/>
<lp1:getcontentlength>5</lp1:getcontentlength>
<lp1:getlastmodified>Mon, 01 Jan 2024 00:00:00 GMT</lp1:getlastmodified>
<lp1:getetag>"5-60dd9b0ef4a40"</lp1:getetag>
</D:prop>
<D:status>HTTP/1.1 200 OK</D:status>
</D:propstat>
</D:response>
</D:multistatus>
`
	// nginxAnswer is nginx-dav-ext-module's: everything under D, no
	// namespace on the rest, empty resourcetype for a file.
	nginxAnswer = `<?xml version="1.0" encoding="utf-8" ?>
<D:multistatus xmlns:D="DAV:">
<D:response>
<D:href>/dav/</D:href>
<D:propstat>
<D:prop>
<D:displayname>dav</D:displayname>
<D:getlastmodified>Mon, 01 Jan 2024 00:00:00 GMT</D:getlastmodified>
<D:resourcetype><D:collection/></D:resourcetype>
<D:lockdiscovery/>
<D:supportedlock>
</D:supportedlock>
</D:prop>
<D:status>HTTP/1.1 200 OK</D:status>
</D:propstat>
</D:response>
<D:response>
<D:href>/dav/file.txt</D:href>
<D:propstat>
<D:prop>
<D:displayname>file.txt</D:displayname>
<D:getcontentlength>5</D:getcontentlength>
<D:getlastmodified>Mon, 01 Jan 2024 00:00:00 GMT</D:getlastmodified>
<D:resourcetype></D:resourcetype>
<D:lockdiscovery/>
<D:supportedlock>
</D:supportedlock>
</D:prop>
<D:status>HTTP/1.1 200 OK</D:status>
</D:propstat>
</D:response>
</D:multistatus>
`
	// storageAnswer is lakefed's storage role's (livelist.go), for a
	// collection, a file and one HEAD would refuse.
	storageAnswer = `<?xml version="1.0" encoding="UTF-8"?><D:multistatus xmlns:D="DAV:">` +
		`<D:response><D:href>/d/</D:href><D:propstat><D:prop><D:resourcetype><D:collection xmlns:D="DAV:"/></D:resourcetype>` +
		`<D:getlastmodified>Thu, 26 Nov 2026 21:12:49 GMT</D:getlastmodified></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat>` +
		`<D:propstat><D:prop><D:getcontentlength></D:getcontentlength><D:getetag></D:getetag></D:prop><D:status>HTTP/1.1 404 Not Found</D:status></D:propstat></D:response>` +
		`<D:response><D:href>/d/run%20000003%20&amp;%20co.root</D:href><D:propstat><D:prop><D:resourcetype></D:resourcetype><D:getcontentlength>1</D:getcontentlength>` +
		`<D:getlastmodified>Thu, 26 Nov 2026 21:12:49 GMT</D:getlastmodified><D:getetag>"18ebb4b5c4be1b651-9ba221-18ebb4b5c4be1b65"</D:getetag></D:prop>` +
		`<D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>` +
		`<D:response><D:href>/d/secret</D:href><D:status>HTTP/1.1 403 Forbidden</D:status></D:response></D:multistatus>`
	// quotaAnswer is an RFC 4331 answer to QuotaBody.
	quotaAnswer = `<?xml version="1.0" encoding="utf-8"?><d:multistatus xmlns:d="DAV:"><d:response><d:href>/q/</d:href>` +
		`<d:propstat><d:prop><d:quota-available-bytes>1000</d:quota-available-bytes><d:quota-used-bytes>24</d:quota-used-bytes></d:prop>` +
		`<d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response></d:multistatus>`
)

// sameAsReference fails t unless Decode and decodeReference agree on
// body read with limit: both fail, or both give equal answers having read
// as much of the body.
func sameAsReference(t *testing.T, body []byte, limit int64) (*Multistatus, error) {
	t.Helper()
	refR, newR := &countingBody{r: bytes.NewReader(body)}, &countingBody{r: bytes.NewReader(body)}
	want, wantErr := decodeReference(refR, limit)
	got, err := Decode(newR, limit)
	switch {
	case (err == nil) != (wantErr == nil):
		t.Fatalf("Decode(%q, %d) error = %v, reference %v", body, limit, err, wantErr)
	case !reflect.DeepEqual(got, want):
		t.Fatalf("Decode(%q, %d) =\n%s\nreference\n%s", body, limit, dump(got), dump(want))
	case refR.n != newR.n:
		t.Fatalf("Decode(%q, %d) read %d bytes, reference %d", body, limit, newR.n, refR.n)
	}
	return got, err
}

// countingBody counts the bytes read through it.
type countingBody struct {
	r io.Reader
	n int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// dump shows ms with its pointers followed.
func dump(ms *Multistatus) string {
	if ms == nil {
		return "nil"
	}
	var b strings.Builder
	for _, r := range ms.Responses {
		fmt.Fprintf(&b, "response href=%q status=%q\n", r.Href, r.Status)
		for _, ps := range r.Propstats {
			pr := ps.Prop
			rt := "nil"
			if pr.ResourceType != nil {
				rt = fmt.Sprintf("{collection %v}", pr.ResourceType.Collection != nil)
			}
			fmt.Fprintf(&b, "  propstat status=%q resourcetype=%s length=%q modified=%q etag=%q iscollection=%q quota=%q/%q\n",
				ps.Status, rt, pr.ContentLength, pr.LastModified, pr.ETag, pr.IsCollection, pr.QuotaAvailable, pr.QuotaUsed)
		}
	}
	return b.String()
}

// ms wraps responses in a multistatus declaring D as DAV:.
func ms(responses string) string {
	return `<D:multistatus xmlns:D="DAV:">` + responses + `</D:multistatus>`
}

// decodeCases are the inputs TestDecodeSameAsReference and FuzzDecode's
// seeds hold Decode to the reference on: what servers write, and what
// the reflection's rules make of odd shapes.
var decodeCases = []struct {
	name string
	body string
	// check, when set, says what the reference is expected to give, so
	// that the table documents its rules rather than only agreeing.
	check func(*Multistatus, error) string
}{
	{"xrdhttp", answer, nil},
	{"apache", apacheAnswer, nil},
	{"nginx", nginxAnswer, nil},
	{"storage", storageAnswer, nil},
	{"quota", quotaAnswer, nil},

	// What is not a multistatus, or not only one.
	{"empty", "", wantErr},
	{"only space", " \n\t", wantErr},
	{"only a declaration", `<?xml version="1.0"?>`, wantErr},
	{"only a comment", `<!-- nothing -->`, wantErr},
	{"text", "HTTP/1.1 207", wantErr},
	{"root not multistatus", `<D:error xmlns:D="DAV:"><D:response><D:href>/x</D:href></D:response></D:error>`, wantHrefs("/x")},
	{"root a response", `<D:response xmlns:D="DAV:"><D:href>/x</D:href><D:response><D:href>/y</D:href></D:response></D:response>`, wantHrefs("/y")},
	{"root out of any name space", `<multistatus><D:response xmlns:D="DAV:"><D:href>/x</D:href></D:response></multistatus>`, wantHrefs("/x")},
	{"empty root", `<D:multistatus xmlns:D="DAV:"/>`, wantHrefs()},
	{"trailing garbage", ms(`<D:response><D:href>/x</D:href></D:response>`) + `<<<&&& </a> garbage`, wantHrefs("/x")},
	{"second root", ms(`<D:response><D:href>/x</D:href></D:response>`) + ms(`<D:response><D:href>/y</D:href></D:response>`), wantHrefs("/x")},
	{"unclosed", `<D:multistatus xmlns:D="DAV:"><D:response><D:href>/x</D:href></D:response>`, wantErr},
	{"cut in a name", `<D:multistatus xmlns:D="DAV:"><D:respo`, wantErr},
	{"cut in text", `<D:multistatus xmlns:D="DAV:"><D:response><D:href>/x`, wantErr},
	{"end before root", `</a><D:multistatus xmlns:D="DAV:"/>`, wantErr},
	{"text and comments before root", "junk <!-- c --> <?pi x?> <!DOCTYPE x>" + ms(`<D:response/>`), wantHrefs("")},
	{"mismatched end", ms(`<D:response><D:href>/x</D:hre></D:response>`), wantErr},
	{"end in another prefix of the same space", `<D:multistatus xmlns:D="DAV:" xmlns:E="DAV:"><D:response></E:response></D:multistatus>`, wantErr},
	{"end without prefix", ms(`<D:response></response>`), wantErr},
	{"mismatched end in a skipped element", ms(`<D:response><x:a xmlns:x="o"><b></c></x:a></D:response>`), wantErr},
	{"mismatched end in text", ms(`<D:response><D:href>/x<b></c></D:href></D:response>`), wantErr},
	{"latin-1 declared", `<?xml version="1.0" encoding="ISO-8859-1"?>` + ms(``), wantErr},
	{"version 1.1", `<?xml version="1.1"?>` + ms(``), wantErr},
	{"undefined entity", ms(`<D:response><D:href>&nbsp;</D:href></D:response>`), wantErr},
	{"invalid utf-8", ms("<D:response><D:href>\xff</D:href></D:response>"), wantErr},
	{"invalid character", ms("<D:response><D:href>\x01</D:href></D:response>"), wantErr},
	{"attribute without value", ms(`<D:response x><D:href>/x</D:href></D:response>`), wantErr},
	{"name with two colons", ms(`<D:a:b/>`), wantErr},

	// Name spaces: response, href, status and propstat in DAV: only.
	{"default name space", `<multistatus xmlns="DAV:"><response><href>/x</href><propstat><prop><getcontentlength>1</getcontentlength></prop><status>s</status></propstat></response></multistatus>`, wantHrefs("/x")},
	{"no name space", `<multistatus><response><href>/x</href></response></multistatus>`, wantHrefs()},
	{"undeclared prefix", `<D:multistatus><D:response><D:href>/x</D:href></D:response></D:multistatus>`, wantHrefs()},
	{"DAV as a prefix", `<DAV:multistatus><DAV:response><DAV:href>/x</DAV:href></DAV:response></DAV:multistatus>`, wantHrefs()},
	{"other name space", `<D:multistatus xmlns:D="DAV"><D:response><D:href>/x</D:href></D:response></D:multistatus>`, wantHrefs()},
	{"declared on the element", `<m><x:response xmlns:x="DAV:"><x:href>/x</x:href><y:status xmlns:y="DAV:">s</y:status></x:response></m>`, wantHrefs("/x")},
	{"redeclared inside", ms(`<D:response><D:href>/x</D:href><q xmlns:D="other"><D:href>/no</D:href></q><D:href xmlns:D="other">/no</D:href></D:response><D:response><D:href>/y</D:href></D:response>`), wantHrefs("/x", "/y")},
	{"default undeclared", `<multistatus xmlns="DAV:"><response><href>/x</href></response><response xmlns=""><href>/no</href></response><response><href>/y</href></response></multistatus>`, wantHrefs("/x", "/y")},
	{"prefix undeclared", ms(`<D:response xmlns:D=""><D:href>/no</D:href></D:response><D:response><D:href>/y</D:href></D:response>`), wantHrefs("/y")},
	{"twice on one element", `<m xmlns:D="DAV:" xmlns:D="x"><D:response/></m><m xmlns:D="x" xmlns:D="DAV:"><D:response/></m>`, wantHrefs()},
	{"twice on one element, DAV last", `<m xmlns:D="x" xmlns:D="DAV:"><D:response/></m>`, wantHrefs("")},
	{"xml and xmlns prefixes", `<m xmlns:xml="DAV:" xmlns:xmlns="DAV:"><xml:response/><xmlns:response/><xmlns/></m>`, wantHrefs()},
	{"response in another name space", ms(`<x:response xmlns:x="DAVx"><D:href>/x</D:href></x:response>`), wantHrefs()},
	{"href in another name space", ms(`<D:response><href>/x</href><x:href xmlns:x="y">/x</x:href></D:response>`), wantHrefs("")},
	{"propstat in another name space", ms(`<D:response><propstat><D:prop><D:getcontentlength>1</D:getcontentlength></D:prop></propstat></D:response>`), nil},
	{"status in another name space", ms(`<D:response><status>a</status><D:propstat><status>b</status><x:prop xmlns:x="y"><getetag>e</getetag></x:prop></D:propstat></D:response>`), nil},
	{"properties in any name space", `<D:multistatus xmlns:D="DAV:" xmlns:L="LCGDM:"><D:response><D:propstat><L:prop><getcontentlength>1</getcontentlength><L:iscollection>1</L:iscollection><x:getetag xmlns:x="q">e</x:getetag><L:resourcetype><collection/></L:resourcetype><quota-used-bytes>3</quota-used-bytes><L:quota-available-bytes>4</L:quota-available-bytes><y:getlastmodified>m</y:getlastmodified></L:prop></D:propstat></D:response></D:multistatus>`, nil},
	{"many declarations", manyDeclarations(), nil},

	// Where elements are found: at their place only.
	{"response nested", ms(`<D:x><D:response><D:href>/x</D:href></D:response></D:x><D:response><D:response><D:href>/y</D:href></D:response></D:response>`), wantHrefs("")},
	{"propstat under multistatus", ms(`<D:propstat><D:status>s</D:status></D:propstat>`), wantHrefs()},
	{"prop under response", ms(`<D:response><D:prop><D:getcontentlength>1</D:getcontentlength></D:prop></D:response>`), nil},
	{"property under propstat", ms(`<D:response><D:propstat><D:getcontentlength>1</D:getcontentlength><D:x><D:prop><D:getetag>e</D:getetag></D:prop></D:x></D:propstat></D:response>`), nil},
	{"property nested in prop", ms(`<D:response><D:propstat><D:prop><D:x><D:getcontentlength>1</D:getcontentlength></D:x><D:getetag><D:getetag>e</D:getetag></D:getetag></D:prop></D:propstat></D:response>`), nil},
	{"collection nested", ms(`<D:response><D:propstat><D:prop><D:resourcetype><D:x><D:collection/></D:x></D:resourcetype></D:prop></D:propstat></D:response>`), nil},
	{"collection with content", ms(`<D:response><D:propstat><D:prop><D:resourcetype><D:collection>text<D:y/></D:collection><D:other/></D:resourcetype></D:prop></D:propstat></D:response>`), nil},
	{"attributes", ms(`<D:response a="1" D:b="2"><D:href c="3">/x</D:href><D:propstat><D:prop d="4"><D:getetag e="5">e</D:getetag></D:prop></D:propstat></D:response>`), wantHrefs("/x")},

	// Repeated elements: the last string wins, even empty; slices grow;
	// the prop and resourcetype of a propstat are merged.
	{"href twice", ms(`<D:response><D:href>/x</D:href><D:href>/y</D:href></D:response>`), wantHrefs("/y")},
	{"href then empty", ms(`<D:response><D:href>/x</D:href><D:href/></D:response>`), wantHrefs("")},
	{"status twice", ms(`<D:response><D:status>a</D:status><D:propstat><D:status>b</D:status><D:status>c</D:status></D:propstat><D:status>d</D:status></D:response>`), nil},
	{"prop twice", ms(`<D:response><D:propstat><D:prop><D:getcontentlength>1</D:getcontentlength><D:getetag>e</D:getetag><D:resourcetype><D:collection/></D:resourcetype></D:prop><D:prop><D:getcontentlength>2</D:getcontentlength><D:resourcetype/></D:prop></D:propstat></D:response>`), nil},
	{"resourcetype twice", ms(`<D:response><D:propstat><D:prop><D:resourcetype/><D:resourcetype><D:collection/></D:resourcetype><D:resourcetype/></D:prop></D:propstat></D:response>`), nil},
	{"propstats", ms(`<D:response><D:propstat/><D:propstat><D:status>x</D:status></D:propstat><D:propstat></D:propstat></D:response>`), nil},

	// Character data: all of the element's own, joined; none of its
	// children's.
	{"entities", ms(`<D:response><D:href>/a&amp;b&lt;&#x20;&#233;&quot;&apos;&gt;</D:href></D:response>`), wantHrefs(`/a&b< é"'>`)},
	{"cdata", ms(`<D:response><D:href>/a<![CDATA[<&>]]>b</D:href></D:response>`), wantHrefs("/a<&>b")},
	{"split by comments", ms(`<D:response><D:href>/a<!-- x -->b<?pi?>c</D:href></D:response>`), wantHrefs("/abc")},
	{"mixed with elements", ms(`<D:response><D:href>/a<x>no</x>b<y><D:href>no</D:href></y>c</D:href></D:response>`), wantHrefs("/abc")},
	{"white space kept", ms("<D:response><D:href>\n\t /x \r\n</D:href></D:response>"), wantHrefs("\n\t /x \n")},
	{"text around responses", ms(`a<D:response>b<D:propstat>c<D:prop>d<D:getetag>e</D:getetag>f</D:prop>g</D:propstat>h</D:response>i`), nil},
}

func wantErr(_ *Multistatus, err error) string {
	if err == nil {
		return "no error"
	}
	return ""
}

// wantHrefs checks that the answer has a response for each of hrefs.
func wantHrefs(hrefs ...string) func(*Multistatus, error) string {
	return func(ms *Multistatus, err error) string {
		if err != nil {
			return err.Error()
		}
		got := []string{}
		for _, r := range ms.Responses {
			got = append(got, r.Href)
		}
		if !slices.Equal(got, hrefs) {
			return fmt.Sprintf("hrefs %q, want %q", got, hrefs)
		}
		return ""
	}
}

// manyDeclarations declares a hundred prefixes, more than the parser
// walks before it takes a map (mapAfter), shadowing and undoing some.
func manyDeclarations() string {
	var b strings.Builder
	b.WriteString(`<m xmlns:D="DAV:"`)
	for i := range 100 {
		fmt.Fprintf(&b, ` xmlns:p%d="DAV:"`, i)
	}
	b.WriteString(`>`)
	for i := range 100 {
		fmt.Fprintf(&b, `<p%d:response xmlns:q%d="x"><p%d:href>/%d</p%d:href></p%d:response>`, i, i, i, i, i, i)
	}
	b.WriteString(`<D:response xmlns:D="x" xmlns:p1="x"><D:href>no</D:href><p1:href>no</p1:href></D:response>`)
	b.WriteString(`<D:response><p1:href>/yes</p1:href><q1:href>no</q1:href></D:response>`)
	b.WriteString(`</m>`)
	return b.String()
}

// TestDecodeSameAsReference holds Decode to the reflection decoder on the
// table, whole and cut (as the limit cuts a body).
func TestDecodeSameAsReference(t *testing.T) {
	for _, c := range decodeCases {
		t.Run(c.name, func(t *testing.T) {
			got, err := sameAsReference(t, []byte(c.body), MaxBody)
			if c.check != nil {
				if msg := c.check(got, err); msg != "" {
					t.Errorf("%s", msg)
				}
			}
			// Every cut of a short body, a thousand of a long one.
			for n := 0; n < len(c.body); n += 1 + len(c.body)/1000 {
				sameAsReference(t, []byte(c.body), int64(n))
			}
		})
	}
}

// TestDecodeErrors checks that the errors Decode itself makes, where Token
// used to, read as they did.
func TestDecodeErrors(t *testing.T) {
	for _, body := range []string{
		`<D:multistatus xmlns:D="DAV:"><D:response>`,
		`</D:multistatus>`,
		"<a>\n<b></c></a>",
		`<D:a xmlns:D="DAV:" xmlns:E="DAV:"></E:a>`,
		`<D:a xmlns:D="DAV:"></a>`,
		`<a></D:a>`,
	} {
		_, wantErr := decodeReference(strings.NewReader(body), MaxBody)
		_, err := Decode(strings.NewReader(body), MaxBody)
		if err == nil || wantErr == nil || err.Error() != wantErr.Error() {
			t.Errorf("Decode(%q) error %v, reference %v", body, err, wantErr)
		}
	}
}

// TestDecodeListings holds Decode to the reference on the listings the
// benchmark reads.
func TestDecodeListings(t *testing.T) {
	for _, body := range [][]byte{storageListing(t, 300), xrdHTTPListing(300)} {
		ms, _ := sameAsReference(t, body, MaxBody)
		if len(ms.Responses) != 301 {
			t.Errorf("%d responses, want 301", len(ms.Responses))
		}
	}
}

// FuzzDecode holds Decode to the reflection decoder: both fail, or both
// give equal answers, having read as much of the body. limit, when not
// 0, cuts the body at limit-1 bytes.
func FuzzDecode(f *testing.F) {
	for _, c := range decodeCases {
		f.Add([]byte(c.body), uint16(0))
	}
	f.Add([]byte(answer), uint16(300))
	f.Add([]byte(storageAnswer), uint16(200))
	f.Add(xrdHTTPListing(3), uint16(0))
	f.Add([]byte(strings.Repeat("<a>", 100)+strings.Repeat("</a>", 100)), uint16(0))
	f.Fuzz(func(t *testing.T, body []byte, limit uint16) {
		n := int64(MaxBody)
		if limit > 0 {
			n = int64(limit) - 1
		}
		sameAsReference(t, body, n)
	})
}
