package interop

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lakefed/lakefed/internal/config"
	"github.com/lakefed/lakefed/internal/endpoint/xroot/xrdwire"
	"github.com/lakefed/lakefed/internal/server/servertest"
	"github.com/lakefed/lakefed/internal/testenv"
)

// TestXrootDoorSplicedReads: files the door serves itself from two
// lakefed storage sites over HTTP. Plain reads (xrdcp with
// XRD_CPUSEPGWRTRD=0, as CMSSW and the AAA read test read) go from the
// site's socket to the client's by splice, never through the door's
// memory; pgread (xrdcp's default) and vector reads are copied, since the
// door frames their bytes. Every client gets the file's bytes.
func TestXrootDoorSplicedReads(t *testing.T) {
	xrdcp := testenv.Require(t, "xrdcp")
	py := testenv.Require(t, "python3")
	fed := servertest.Start(t, servertest.Options{Sites: 2, Configure: func(c *config.Config) {
		c.ListenXroot = "127.0.0.1:0"
	}})
	door := fed.Server.XrootURL()
	rng := rand.New(rand.NewPCG(14, 2))
	data := make([]byte, 24<<20+13)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for _, s := range fed.Sites {
		writeUnder(t, s.Dir, "/lake/big.bin", data)
		// Kept, as for a file received by PUT: it lets the door's
		// reader fail over between the two sites.
		req, _ := http.NewRequest(http.MethodHead, s.URL+"lake/big.bin", nil)
		req.Header.Set("Want-Digest", "adler32")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	work := t.TempDir()
	for _, c := range []struct {
		name    string
		env     []string
		spliced bool
	}{
		{"read", []string{"XRD_CPUSEPGWRTRD=0"}, true},
		{"pgread", nil, false},
	} {
		before := doorStats(t, fed.URL)
		dst := filepath.Join(work, c.name+".bin")
		out := run(t, append(append(doorEnv, c.env...), "XRD_LOGLEVEL=Debug"), xrdcp, "-f", "--cksum", "adler32", door+"//lake/big.bin", dst)
		checkDoorCopy(t, out, dst, data)
		st := doorStats(t, fed.URL)
		read, spliced := st.ReadBytes-before.ReadBytes, st.SplicedBytes-before.SplicedBytes
		switch {
		case read < int64(len(data)):
			t.Errorf("xrdcp (%s): the door sent %d bytes, want at least %d", c.name, read, len(data))
		case c.spliced && spliced < read*9/10:
			t.Errorf("xrdcp (%s): %d of %d bytes spliced, want (nearly) all", c.name, spliced, read)
		case !c.spliced && spliced != 0:
			t.Errorf("xrdcp (%s): %d bytes spliced, want none (the door frames pgread's pages)", c.name, spliced)
		}
	}
	// A vector read: scattered chunks, each from the handle's one reader.
	var chunks, want []string
	for _, off := range []int{0, 5 << 20, 100, 17<<20 + 3, len(data) - 10} {
		n := min(300<<10, len(data)-off)
		chunks = append(chunks, strconv.Itoa(off)+":"+strconv.Itoa(n))
		want = append(want, strconv.Itoa(off)+" "+strconv.Itoa(n)+" "+adlerHex(data[off:off+n]))
	}
	got := strings.TrimSpace(run(t, doorEnv, py, "-c", doorReadvScript, door+"//lake/big.bin", strings.Join(chunks, ",")))
	if got != strings.Join(want, "\n") {
		t.Errorf("vector read through the door:\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}

	// A file replaced behind an open handle, by one of the same size on
	// both sites: the handle's kept reader, moved elsewhere in the file,
	// must refuse the new bytes, spliced or not.
	c, err := xrdwire.Dial(t.Context(), strings.TrimPrefix(door, "root://"), "interop", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Minute))
	sid := uint16(10)
	ask := func(req uint16, params, data []byte) (int, []byte, error) {
		sid++
		h := make([]byte, 24, 24+len(data))
		binary.BigEndian.PutUint16(h, sid)
		binary.BigEndian.PutUint16(h[2:], req)
		copy(h[4:20], params)
		binary.BigEndian.PutUint32(h[20:], uint32(len(data)))
		if _, err := c.Write(append(h, data...)); err != nil {
			t.Fatal(err)
		}
		return xrdwire.ReadAnswer(c, [2]byte{byte(sid >> 8), byte(sid)})
	}
	st, body, err := ask(xrdwire.ReqOpen, []byte{0x01, 0x00, 0x00, 0x10}, []byte("/lake/big.bin"))
	if err != nil || st != 0 || len(body) < 4 {
		t.Fatalf("open: status %d, %v", st, err)
	}
	fh := body[:4]
	read := func(off int64, n int32) (int, []byte, error) {
		params := make([]byte, 16)
		copy(params, fh)
		binary.BigEndian.PutUint64(params[4:], uint64(off))
		binary.BigEndian.PutUint32(params[12:], uint32(n))
		return ask(xrdwire.ReqRead, params, nil)
	}
	if st, body, err := read(0, 3<<20); err != nil || st != 0 || !bytes.Equal(body, data[:3<<20]) {
		t.Fatalf("first read: status %d, %d bytes, %v", st, len(body), err)
	}
	other := bytes.Repeat([]byte("new!"), len(data)/4+1)[:len(data)]
	for _, s := range fed.Sites {
		writeUnder(t, s.Dir, "/lake/big.bin", other)
	}
	for _, off := range []int64{12 << 20, 3 << 20} { // elsewhere, then where the last read ended
		st, body, err := read(off, 3<<20)
		if err == nil && st == 0 && bytes.Equal(body, other[off:off+3<<20]) {
			t.Errorf("read at %d after the file was replaced: the new file's bytes; want an error", off)
		}
		if err == nil && st == 0 && !bytes.Equal(body, data[off:off+3<<20]) {
			t.Errorf("read at %d after the file was replaced: %d bytes that are not the file the handle opened", off, len(body))
		}
	}
}
