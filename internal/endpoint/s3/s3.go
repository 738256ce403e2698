// Package s3 is the endpoint kind for S3 object stores (AWS, s3proxy, MinIO,
// Ceph RGW, ...): url s3://bucket/prefix, with the server and credentials in
// the endpoint's s3: options. Clients are redirected to it with pre-signed
// URLs, so credentials never leave the server and bytes never pass it.
//
//	ep, err := s3.New(ctx, endpoint.Config{Name: "cloud", URL: "s3://lake/atlas",
//		S3: &endpoint.S3Config{Endpoint: "http://127.0.0.1:9000", PathStyle: true}}, nil)
//	info, err := ep.Stat(ctx, "/f.root")                      // HEAD Object
//	u, err := ep.RedirectURL(ctx, "/f.root", endpoint.OpRead) // pre-signed GET
//
// S3 has objects, not files and directories. The kind maps them so the
// federator sees a tree (the S3 console's convention):
//   - a file /a/b is the object prefix+"a/b";
//   - a directory /a exists when some object's key starts with prefix+"a/":
//     listing uses ListObjectsV2 with the delimiter "/", whose common prefixes
//     are the sub-directories;
//   - Mkdir writes zero-byte markers ("a/") for the directory and its
//     missing parents, so an empty directory survives; List hides them. A
//     directory without a marker vanishes with its last file, as in S3.
//
// S3 has no rename, and the kind does not offer one (it is not an
// endpoint.Renamer): CopyObject then DeleteObject would show the object
// under both names in between, and leave both after a failure. Nor has it
// permissions, an in-place truncate or a capacity to report.
//
// Every Put stores the adler32 of the data as user metadata
// (x-amz-meta-adler32), so Stat and Checksum answer without reading the
// object; see Put for how that is done for multipart uploads.
package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
	"github.com/lakefed/lakefed/internal/httpx/transport"
)

// Defaults and limits of the s3: options. The limits are S3's own
// (https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html).
const (
	// DefaultRegion is used when S3Config.Region is empty.
	DefaultRegion = "us-east-1"
	// MaxPresignExpiry is the longest a SigV4 pre-signed URL may live.
	MaxPresignExpiry = 7 * 24 * time.Hour
	// DefaultPartSize is the multipart part size and threshold by default.
	DefaultPartSize = 64 << 20
	// MinPartSize is the smallest part S3 takes (all but the last part).
	MinPartSize = 5 << 20
	// MaxPartSize is the largest part, and the largest single PUT or copy.
	MaxPartSize = 5 << 30
	// MaxParts is the most parts one multipart upload may have.
	MaxParts = 10000
)

// metaAdler32 is the user-metadata key (x-amz-meta-adler32 on the wire)
// under which lakefed stores a file's adler32, as 8 lower-case hex digits.
const metaAdler32 = "Adler32"

// Endpoint is one S3 bucket (and key prefix) as a lakefed endpoint. It is
// safe for concurrent use.
type Endpoint struct {
	name    string
	bucket  string
	prefix  string // key prefix without leading or trailing "/", or ""
	timeout time.Duration
	expiry  time.Duration
	// threshold is the largest Put sent as one PUT; partSize the part size
	// of larger ones.
	threshold, partSize int64
	// meta makes one attempt per request: the federator has other replicas
	// and must not wait out retries against a dead server. data retries
	// (uploads of buffered parts, which are safe to resend).
	meta, data *minio.Core
	log        *slog.Logger
}

var (
	_ endpoint.Endpoint    = (*Endpoint)(nil)
	_ endpoint.Presigner   = (*Endpoint)(nil)
	_ endpoint.Checksummer = (*Endpoint)(nil)

	_ endpoint.ValidatorReporter = (*Endpoint)(nil)
)

// New checks cfg and returns the endpoint. It does not contact the server:
// an endpoint that is down at start is still made, and Probe says so.
func New(ctx context.Context, cfg endpoint.Config, log *slog.Logger) (*Endpoint, error) {
	if log == nil {
		log = slog.Default()
	}
	if cfg.Name == "" {
		return nil, errors.New("s3: endpoint has no name")
	}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("s3: endpoint %s: url: %w", cfg.Name, err)
	}
	if !strings.EqualFold(u.Scheme, "s3") {
		return nil, fmt.Errorf("s3: endpoint %s: url %q is not s3://bucket/prefix", cfg.Name, cfg.URL)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("s3: endpoint %s: url must be s3://bucket/prefix, without credentials, query or fragment (credentials go in s3: access_key/secret_key)", cfg.Name)
	}
	if err := s3utils.CheckValidBucketNameStrict(u.Host); err != nil {
		return nil, fmt.Errorf("s3: endpoint %s: bucket %q: %w", cfg.Name, u.Host, err)
	}
	prefix := strings.Trim(path.Clean("/"+u.Path), "/")
	if cfg.S3 == nil || cfg.S3.Endpoint == "" {
		return nil, fmt.Errorf("s3: endpoint %s: s3.endpoint (the server's URL) is required", cfg.Name)
	}
	sc := *cfg.S3
	host, secure, err := serverAddr(sc.Endpoint)
	if err != nil {
		return nil, fmt.Errorf("s3: endpoint %s: s3.endpoint: %w", cfg.Name, err)
	}
	e := &Endpoint{
		name:    cfg.Name,
		bucket:  u.Host,
		prefix:  prefix,
		timeout: cfg.TimeoutOrDefault(),
		expiry:  sc.PresignExpiry,
		log:     log.With("component", "endpoint", "kind", "s3", "endpoint", cfg.Name),
	}
	var errs []error
	if e.expiry == 0 {
		e.expiry = endpoint.DefaultPresignExpiry
	}
	if e.expiry < time.Second || e.expiry > MaxPresignExpiry {
		errs = append(errs, fmt.Errorf("s3.presign_expiry %v: must be between 1s and 168h", sc.PresignExpiry))
	}
	if e.threshold, err = sizeOption(sc.MultipartThreshold, DefaultPartSize); err != nil {
		errs = append(errs, fmt.Errorf("s3.multipart_threshold: %w", err))
	} else if e.threshold > MaxPartSize {
		errs = append(errs, fmt.Errorf("s3.multipart_threshold %q: at most 5GiB (the largest single PUT)", sc.MultipartThreshold))
	}
	if e.partSize, err = sizeOption(sc.PartSize, DefaultPartSize); err != nil {
		errs = append(errs, fmt.Errorf("s3.part_size: %w", err))
	} else if e.partSize < MinPartSize || e.partSize > MaxPartSize {
		errs = append(errs, fmt.Errorf("s3.part_size %q: must be between 5MiB and 5GiB", sc.PartSize))
	}
	if (sc.AccessKey == "") != (sc.SecretKey == "") {
		errs = append(errs, errors.New("s3.access_key and s3.secret_key: give both or neither"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("s3: endpoint %s: %w", cfg.Name, err)
	}

	creds := credentials.NewStaticV4(sc.AccessKey, sc.SecretKey, "")
	if sc.AccessKey == "" {
		// From the environment; none there means anonymous requests
		// (a public bucket).
		creds = credentials.NewStaticV4(os.Getenv("AWS_ACCESS_KEY_ID"),
			os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_SESSION_TOKEN"))
	}
	// One transport for both clients, with the kinds' defaults: many
	// idle connections (the federator reads in parallel) and no
	// transparent gzip, which would hide lengths.
	tr, err := transport.New(cfg, transport.Options{})
	if err != nil {
		return nil, fmt.Errorf("s3: endpoint %s: %w", cfg.Name, err)
	}
	region := sc.Region
	if region == "" {
		region = DefaultRegion
	}
	lookup := minio.BucketLookupAuto
	if sc.PathStyle {
		lookup = minio.BucketLookupPath
	}
	mk := func(attempts int) (*minio.Core, error) {
		return minio.NewCore(host, &minio.Options{
			// A large read its caller forwards to a socket goes on a
			// connection of its own, whose body splices (reader.Ready).
			Creds: creds, Secure: secure, Transport: transport.RoundTripper(tr),
			// A known region means no GetBucketLocation round trip, and
			// pre-signing works offline.
			Region: region, BucketLookup: lookup, MaxRetries: attempts,
		})
	}
	if e.meta, err = mk(1); err != nil {
		return nil, fmt.Errorf("s3: endpoint %s: %w", cfg.Name, err)
	}
	if e.data, err = mk(3); err != nil {
		return nil, fmt.Errorf("s3: endpoint %s: %w", cfg.Name, err)
	}
	return e, nil
}

// serverAddr splits the s3.endpoint option into minio-go's host:port and
// whether to use TLS. A bare host:port means https.
func serverAddr(s string) (host string, secure bool, err error) {
	if !strings.Contains(s, "://") {
		return s, true, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", false, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", false, fmt.Errorf("%q: scheme must be http or https", s)
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.User != nil {
		return "", false, fmt.Errorf("%q: give only scheme://host:port", s)
	}
	return u.Host, u.Scheme == "https", nil
}

var sizeRE = regexp.MustCompile(`^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$`)

// sizeOption parses a size string ("64MiB", "100MB", "5M", "1048576"); an
// empty string gives def. Units: B; KB, MB, GB, TB (powers of 1000); K,
// KiB, M, MiB, G, GiB, T, TiB (powers of 1024), as rclone reads them.
func sizeOption(s string, def int64) (int64, error) {
	if strings.TrimSpace(s) == "" {
		return def, nil
	}
	m := sizeRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a size such as 64MiB", s)
	}
	mult := map[string]float64{
		"": 1, "b": 1,
		"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
		"k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
		"g": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tib": 1 << 40,
	}[strings.ToLower(m[2])]
	if mult == 0 {
		return 0, fmt.Errorf("%q: unknown unit %q", s, m[2])
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil || v*mult > 1<<50 {
		return 0, fmt.Errorf("%q is not a size such as 64MiB", s)
	}
	return int64(v * mult), nil
}

// Name returns the endpoint's name from the config.
func (e *Endpoint) Name() string { return e.name }

// key is the object key of the clean endpoint path p; "" for the root of an
// endpoint without prefix.
func (e *Endpoint) key(p string) string {
	return strings.TrimPrefix(path.Join(e.prefix, p), "/")
}

// dirPrefix is the key prefix of everything inside directory p: key+"/",
// or "" for the root of an endpoint without prefix.
func (e *Endpoint) dirPrefix(p string) string {
	k := e.key(p)
	if k == "" {
		return ""
	}
	return k + "/"
}

// metaCtx bounds a metadata operation by the endpoint's timeout.
func (e *Endpoint) metaCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, e.timeout)
}

// Stat describes p with a HEAD Object; when there is no object, p is a
// directory if any key starts with p's key and "/". The root always exists
// when the bucket answers. Checksums hold adler32 when a writer stored it
// (lakefed does on every Put) and md5 when the ETag is one.
func (e *Endpoint) Stat(ctx context.Context, p string) (endpoint.Info, error) {
	ctx, cancel := e.metaCtx(ctx)
	defer cancel()
	if p == "/" {
		if _, err := e.hasKeys(ctx, e.dirPrefix(p), 1); err != nil {
			return endpoint.Info{}, e.wrap("stat", p, err)
		}
		return endpoint.Info{Name: "/", IsDir: true}, nil
	}
	oi, err := e.meta.StatObject(ctx, e.bucket, e.key(p), minio.StatObjectOptions{})
	if err == nil {
		return fileInfo(path.Base(p), oi, true), nil
	}
	if !isNotFound(err) {
		return endpoint.Info{}, e.wrap("stat", p, err)
	}
	n, err := e.hasKeys(ctx, e.dirPrefix(p), 1)
	if err == nil && n == 0 {
		// Some servers (s3proxy's filesystem backend) list nothing under
		// an empty directory's marker: ask for the marker itself.
		n, err = e.marker(ctx, p)
	}
	if err != nil {
		return endpoint.Info{}, e.wrap("stat", p, err)
	}
	if n == 0 {
		return endpoint.Info{}, opErr("stat", p, endpoint.ErrNotFound)
	}
	return endpoint.Info{Name: path.Base(p), IsDir: true}, nil
}

// marker returns 1 when p's directory marker ("a/b/") exists, else 0.
func (e *Endpoint) marker(ctx context.Context, p string) (int, error) {
	_, err := e.meta.StatObject(ctx, e.bucket, e.dirPrefix(p), minio.StatObjectOptions{})
	switch {
	case err == nil:
		return 1, nil
	case isNotFound(err):
		return 0, nil
	}
	return 0, err
}

// fileInfo turns an object into an Info. withMeta says whether oi came
// from a HEAD (listings carry no user metadata).
func fileInfo(name string, oi minio.ObjectInfo, withMeta bool) endpoint.Info {
	info := endpoint.Info{Name: name, Size: oi.Size, ModTime: oi.LastModified, ETag: strings.Trim(oi.ETag, `"`), Strong: strongETag(oi.ETag)}
	sums := map[string]string{}
	if withMeta {
		if v := adler32Meta(oi); v != "" {
			sums["adler32"] = v
		}
	}
	if isMD5ETag(info.ETag) {
		sums["md5"] = strings.ToLower(info.ETag)
	}
	if len(sums) > 0 {
		info.Checksums = sums
	}
	return info
}

// strongETag reports whether an object's ETag names its bytes: S3 makes
// it from the content (the MD5 of a single-part upload, the MD5 of the
// parts' MD5s of a multipart one; a new object of the same size and
// time gets another), unless it is marked weak.
func strongETag(etag string) bool {
	return strings.Trim(etag, `"`) != "" && !strings.HasPrefix(etag, "W/")
}

// Validators are strong: see strongETag.
func (e *Endpoint) Validators() endpoint.Validators { return endpoint.ValidatorsStrong }

var hex8 = regexp.MustCompile(`^[0-9a-fA-F]{8}$`)

// adler32Meta returns the adler32 a writer stored in the object's user
// metadata, or "" when there is none or it is malformed.
func adler32Meta(oi minio.ObjectInfo) string {
	v := oi.Metadata.Get("X-Amz-Meta-" + metaAdler32)
	if v == "" {
		for k, val := range oi.UserMetadata {
			if strings.EqualFold(k, metaAdler32) {
				v = val
			}
		}
	}
	v = strings.TrimSpace(v)
	if !hex8.MatchString(v) {
		return ""
	}
	return strings.ToLower(v)
}

var hex32 = regexp.MustCompile(`^[0-9a-fA-F]{32}$`)

// isMD5ETag reports whether an ETag is the object's md5: 32 hex digits. A
// multipart upload's ETag ("<md5 of md5s>-<parts>") is not. (An SSE-KMS
// or SSE-C object's ETag is not either, though it looks like one; lakefed
// does not write those.)
func isMD5ETag(etag string) bool { return hex32.MatchString(etag) }

// hasKeys counts up to limit keys under prefix (one ListObjectsV2 page),
// to tell whether a directory exists or is empty. Markers count.
func (e *Endpoint) hasKeys(ctx context.Context, prefix string, limit int) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // stops minio-go's listing goroutine
	n := 0
	for oi := range e.meta.Client.ListObjects(ctx, e.bucket, minio.ListObjectsOptions{Prefix: prefix, MaxKeys: limit}) {
		if oi.Err != nil {
			return n, oi.Err
		}
		n++
		if n >= limit {
			break
		}
	}
	return n, nil
}

// List lists directory dir with ListObjectsV2 and the delimiter "/":
// objects are files, common prefixes directories. Directory markers are
// hidden, and so are keys that make no clean name ("a//b", "a/./b"). An
// empty or missing listing of a path that is an object wraps ErrRefused; of
// anything else but the root, ErrNotFound.
func (e *Endpoint) List(ctx context.Context, dir string) ([]endpoint.Info, error) {
	ctx, cancel := e.metaCtx(ctx)
	defer cancel()
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	prefix := e.dirPrefix(dir)
	var out []endpoint.Info
	seen := false // any key under prefix, markers included
	for oi := range e.meta.Client.ListObjects(lctx, e.bucket, minio.ListObjectsOptions{Prefix: prefix}) {
		if oi.Err != nil {
			return nil, e.wrap("list", dir, oi.Err)
		}
		seen = true
		name := strings.TrimPrefix(oi.Key, prefix)
		isDir := strings.HasSuffix(name, "/")
		name = strings.TrimSuffix(name, "/")
		if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
			continue
		}
		if isDir {
			out = append(out, endpoint.Info{Name: name, IsDir: true})
			continue
		}
		out = append(out, fileInfo(name, oi, false))
	}
	if seen || dir == "/" {
		return out, nil
	}
	if n, err := e.marker(ctx, dir); err != nil {
		return nil, e.wrap("list", dir, err)
	} else if n > 0 {
		return out, nil // an empty directory
	}
	if _, err := e.meta.StatObject(ctx, e.bucket, e.key(dir), minio.StatObjectOptions{}); err == nil {
		return nil, opErr("list", dir, fmt.Errorf("%w: not a directory", endpoint.ErrRefused))
	} else if !isNotFound(err) {
		return nil, e.wrap("list", dir, err)
	}
	return nil, opErr("list", dir, endpoint.ErrNotFound)
}

// errFirstByte is the cause of an Open cancelled because the server sent
// no response headers within the endpoint's timeout.
var errFirstByte = errors.New("no response within the endpoint timeout")

// Open reads n bytes of p from off (n < 0: to the end) with one ranged GET.
// The wait for the response is bounded by the endpoint's timeout, the body
// is not. A range that starts past the end wraps ErrRefused; one that
// starts exactly at the end reads nothing. A directory wraps ErrRefused.
// Errors while reading wrap ErrUnavailable, so a caller can move to
// another replica at the same offset.
func (e *Endpoint) Open(ctx context.Context, p string, off, n int64) (io.ReadCloser, error) {
	if off < 0 {
		return nil, opErr("open", p, fmt.Errorf("%w: negative offset %d", endpoint.ErrRefused, off))
	}
	if p == "/" {
		return nil, opErr("open", p, fmt.Errorf("%w: is a directory", endpoint.ErrRefused))
	}
	if n == 0 {
		return e.openEmpty(ctx, p, off)
	}
	var opts minio.GetObjectOptions
	switch {
	case n > 0:
		_ = opts.SetRange(off, off+n-1)
	case off > 0:
		_ = opts.SetRange(off, 0)
	}
	rctx, cancel := context.WithCancelCause(ctx)
	timer := time.AfterFunc(e.timeout, func() { cancel(errFirstByte) })
	body, oi, hdr, err := e.meta.GetObject(rctx, e.bucket, e.key(p), opts)
	timedOut := !timer.Stop()
	if err != nil {
		cancel(nil)
		if timedOut && errors.Is(context.Cause(rctx), errFirstByte) && ctx.Err() == nil {
			return nil, opErr("open", p, fmt.Errorf("%w: %w", endpoint.ErrUnavailable, errFirstByte))
		}
		switch {
		case isNotFound(err):
			if info, serr := e.Stat(ctx, p); serr == nil && info.IsDir {
				return nil, opErr("open", p, fmt.Errorf("%w: is a directory", endpoint.ErrRefused))
			}
		case isCode(err, "InvalidRange"):
			// 416: off is at or past the end; at the end is an empty read.
			return e.openEmpty(ctx, p, off)
		}
		return nil, e.wrap("open", p, err)
	}
	if timedOut {
		// The answer came just as the timer fired: its body is cancelled.
		body.Close()
		cancel(nil)
		return nil, opErr("open", p, fmt.Errorf("%w: %w", endpoint.ErrUnavailable, errFirstByte))
	}
	// What the answer says of the object (endpoint.Versioned): a ranged
	// answer's ObjectInfo.Size is the range's length, the whole object's
	// is in the Content-Range total.
	ver := endpoint.Info{Size: oi.Size, ETag: strings.Trim(oi.ETag, `"`), ModTime: oi.LastModified, Strong: strongETag(oi.ETag)}
	if cr := hdr.Get("Content-Range"); cr != "" {
		ver.Size = -1
		if _, _, total, ok := httpx.ParseContentRange(cr); ok {
			ver.Size = total
		}
	}
	return &reader{body: body, cancel: cancel, path: p, ver: ver}, nil
}

// openEmpty checks that p is a file and off is not past its end, and
// returns an empty reader.
func (e *Endpoint) openEmpty(ctx context.Context, p string, off int64) (io.ReadCloser, error) {
	info, err := e.Stat(ctx, p)
	switch {
	case err != nil:
		return nil, err
	case info.IsDir:
		return nil, opErr("open", p, fmt.Errorf("%w: is a directory", endpoint.ErrRefused))
	case off > info.Size:
		return nil, opErr("open", p, endpoint.BeyondEnd(off, info.Size))
	}
	return io.NopCloser(strings.NewReader("")), nil
}

// reader is the body of a ranged GET. Read errors (a broken connection, a
// body shorter than its Content-Length) wrap ErrUnavailable. It is an
// endpoint.Splicer when the body came on a connection of its own.
type reader struct {
	body   io.ReadCloser
	cancel context.CancelCauseFunc
	path   string
	ver    endpoint.Info
}

func (r *reader) Version() endpoint.Info { return r.ver }

func (r *reader) Read(b []byte) (int, error) {
	n, err := r.body.Read(b)
	if err != nil && err != io.EOF {
		err = opErr("read", r.path, fmt.Errorf("%w: %w", endpoint.ErrUnavailable, err))
	}
	return n, err
}

// Ready is endpoint.Splicer's: a body that came on a connection of its
// own (transport.Own: a large read over plain HTTP whose caller asked
// for endpoint.WithSplice) splices; other bodies ErrNoSplice.
func (r *reader) Ready() (int64, error) {
	o, ok := r.body.(*transport.OwnBody)
	if !ok {
		return 0, endpoint.ErrNoSplice
	}
	n, err := o.Ready()
	return n, r.spliceErr(err)
}

// SpliceTo is endpoint.Splicer's.
func (r *reader) SpliceTo(dst *net.TCPConn, n int64) (int64, error) {
	o, ok := r.body.(*transport.OwnBody)
	if !ok {
		return 0, endpoint.ErrNoSplice
	}
	m, err := o.SpliceTo(dst, n)
	return m, r.spliceErr(err)
}

// spliceErr wraps a failure of the body's socket as Read's are wrapped.
func (r *reader) spliceErr(err error) error {
	if err == nil || err == io.EOF || errors.Is(err, endpoint.ErrNoSplice) {
		return err
	}
	return opErr("read", r.path, fmt.Errorf("%w: %w", endpoint.ErrUnavailable, err))
}

func (r *reader) Close() error {
	err := r.body.Close()
	r.cancel(nil)
	return err
}

// Delete removes the object p. S3 answers a DELETE of a missing key with
// 204, so Delete asks first (HEAD) to report ErrNotFound as the contract
// says; the cost is one request, and a concurrent delete between the two
// still succeeds, which is harmless. A directory is removed only when it
// holds nothing but its marker; otherwise it wraps ErrRefused.
func (e *Endpoint) Delete(ctx context.Context, p string) error {
	ctx, cancel := e.metaCtx(ctx)
	defer cancel()
	if p == "/" {
		return opErr("delete", p, fmt.Errorf("%w: the root", endpoint.ErrRefused))
	}
	k := e.key(p)
	_, err := e.meta.StatObject(ctx, e.bucket, k, minio.StatObjectOptions{})
	if err == nil {
		return e.wrap("delete", p, e.meta.RemoveObject(ctx, e.bucket, k, minio.RemoveObjectOptions{}))
	}
	if !isNotFound(err) {
		return e.wrap("delete", p, err)
	}
	inside, err := e.keysBesideMarker(ctx, k+"/")
	if err != nil {
		return e.wrap("delete", p, err)
	}
	mk, err := e.marker(ctx, p)
	switch {
	case err != nil:
		return e.wrap("delete", p, err)
	case inside:
		return opErr("delete", p, endpoint.ErrNotEmpty)
	case mk == 0:
		return opErr("delete", p, endpoint.ErrNotFound)
	}
	return e.wrap("delete", p, e.meta.RemoveObject(ctx, e.bucket, k+"/", minio.RemoveObjectOptions{}))
}

// keysBesideMarker reports whether any key other than the marker prefix
// itself starts with prefix.
func (e *Endpoint) keysBesideMarker(ctx context.Context, prefix string) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for oi := range e.meta.Client.ListObjects(ctx, e.bucket, minio.ListObjectsOptions{Prefix: prefix, MaxKeys: 2}) {
		if oi.Err != nil {
			return false, oi.Err
		}
		if oi.Key != prefix {
			return true, nil
		}
	}
	return false, nil
}

// Mkdir makes p a directory that exists while empty: S3 has no
// directories, so it writes zero-byte marker objects ("a/", "a/b/") for p
// and each parent, as the S3 console does. A file at p or at a parent wraps
// ErrExist. Markers are idempotent, so an existing directory is no error.
func (e *Endpoint) Mkdir(ctx context.Context, p string) error {
	if p == "/" {
		return nil
	}
	ctx, cancel := e.metaCtx(ctx)
	defer cancel()
	var dirs []string
	for d := p; d != "/"; d = path.Dir(d) {
		dirs = append(dirs, d)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		d := dirs[i]
		_, err := e.meta.StatObject(ctx, e.bucket, e.key(d), minio.StatObjectOptions{})
		if err == nil {
			return opErr("mkdir", p, fmt.Errorf("%w: %q is a file", endpoint.ErrExist, d))
		}
		if !isNotFound(err) {
			return e.wrap("mkdir", p, err)
		}
		_, err = e.meta.PutObject(ctx, e.bucket, e.key(d)+"/", strings.NewReader(""), 0, "", "",
			minio.PutObjectOptions{ContentType: "application/x-directory", DisableContentSha256: true})
		if err != nil {
			return e.wrap("mkdir", p, err)
		}
	}
	return nil
}

// Probe asks whether the bucket exists (HEAD Bucket), within the
// endpoint's timeout. A missing bucket is a broken endpoint, so it wraps
// ErrUnavailable too.
func (e *Endpoint) Probe(ctx context.Context) error {
	ctx, cancel := e.metaCtx(ctx)
	defer cancel()
	ok, err := e.meta.BucketExists(ctx, e.bucket)
	if err != nil {
		return opErr("probe", "", fmt.Errorf("%w: %w", endpoint.ErrUnavailable, err))
	}
	if !ok {
		return opErr("probe", "", fmt.Errorf("%w: bucket %q does not exist", endpoint.ErrUnavailable, e.bucket))
	}
	return nil
}

// RedirectURL returns a pre-signed URL (SigV4 query signature) for op on
// p, valid for the configured presign_expiry: GET for OpRead (HEAD needs
// its own signature; S3 refuses a GET URL used for HEAD), PUT for OpWrite,
// DELETE for OpDelete. The URL carries the access key id and a signature,
// never the secret. It is made offline. A pre-signed PUT is a single PUT:
// the federator should send only uploads below the multipart threshold
// there, and such uploads carry no adler32 metadata.
func (e *Endpoint) RedirectURL(ctx context.Context, p string, op endpoint.Op) (*url.URL, error) {
	if p == "/" {
		return nil, opErr("redirect", p, fmt.Errorf("%w: the root", endpoint.ErrRefused))
	}
	method := map[endpoint.Op]string{endpoint.OpRead: http.MethodGet, endpoint.OpWrite: http.MethodPut, endpoint.OpDelete: http.MethodDelete}[op]
	if method == "" {
		return nil, opErr("redirect", p, fmt.Errorf("%w: op %v", endpoint.ErrUnsupported, op))
	}
	u, err := e.meta.Presign(ctx, method, e.bucket, e.key(p), e.expiry, nil)
	if err != nil {
		return nil, e.wrap("presign", p, err)
	}
	return u, nil
}

// PresignExpiry is how long RedirectURL's URLs stay valid; the federator
// checks it is no shorter than its metadata cache TTL.
func (e *Endpoint) PresignExpiry() time.Duration { return e.expiry }

// Checksum returns p's adler32 (from the metadata lakefed's Put stores) or
// md5 (from a single-part ETag) with one HEAD. Anything else, or an object
// without the value, wraps ErrUnsupported: S3 cannot compute a checksum of
// a stored object, and reading it all is the caller's call.
func (e *Endpoint) Checksum(ctx context.Context, p, algo string) (string, error) {
	info, err := e.Stat(ctx, p)
	if err != nil {
		return "", err
	}
	if info.IsDir {
		return "", opErr("checksum", p, fmt.Errorf("%w: is a directory", endpoint.ErrRefused))
	}
	if v, ok := info.Checksums[strings.ToLower(algo)]; ok {
		return v, nil
	}
	return "", opErr("checksum", p, fmt.Errorf("%s: %w", algo, endpoint.ErrUnsupported))
}

// errResponse returns the S3 error answer inside err, if there is one.
func errResponse(err error) (minio.ErrorResponse, bool) {
	var r minio.ErrorResponse
	if errors.As(err, &r) {
		return r, true
	}
	return r, false
}

func isCode(err error, code string) bool {
	r, ok := errResponse(err)
	return ok && r.Code == code
}

// isNotFound reports whether S3 said the key is not there (404; a HEAD has
// no body, so minio-go makes up the code).
func isNotFound(err error) bool {
	r, ok := errResponse(err)
	return ok && (r.Code == "NoSuchKey" || r.Code == "NotFound" || r.StatusCode == http.StatusNotFound && r.Code != "NoSuchBucket")
}

// classify says which of the endpoint error classes an S3 or transport
// error belongs to (https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html).
func classify(err error) error {
	if errors.Is(err, endpoint.ErrNotFound) || errors.Is(err, endpoint.ErrRefused) || errors.Is(err, endpoint.ErrUnavailable) {
		return nil // already classed
	}
	if endpoint.IsNetwork(err) {
		return endpoint.ErrUnavailable
	}
	r, ok := errResponse(err)
	if !ok {
		return endpoint.ErrUnavailable
	}
	switch r.Code {
	case "NoSuchKey", "NotFound":
		return endpoint.ErrNotFound
	case "NoSuchBucket", "SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout":
		// A missing bucket is a misconfigured or broken endpoint: never
		// let it count as "the file is not there".
		return endpoint.ErrUnavailable
	case "AccessDenied", "InvalidRange", "InvalidAccessKeyId", "SignatureDoesNotMatch",
		"InvalidArgument", "InvalidRequest", "EntityTooLarge", "EntityTooSmall",
		"PreconditionFailed", "InvalidBucketName", "KeyTooLongError", "XMinioInvalidObjectName":
		return endpoint.ErrRefused
	}
	return endpoint.ClassOfStatus(r.StatusCode)
}

// wrap prefixes err with the kind, op and path, and adds its class.
func (e *Endpoint) wrap(op, p string, err error) error {
	if err == nil {
		return nil
	}
	if c := classify(err); c != nil {
		return opErr(op, p, fmt.Errorf("%w: %w", c, err))
	}
	return opErr(op, p, err)
}

// opErr is the error of op on path p: "s3: op "p": err".
func opErr(op, p string, err error) error {
	return &endpoint.OpError{Kind: endpoint.KindS3, Op: op, Path: p, Err: err}
}
