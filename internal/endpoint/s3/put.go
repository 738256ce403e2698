package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"fmt"
	"io"
	"strings"

	"github.com/minio/minio-go/v7"

	"github.com/lakefed/lakefed/internal/endpoint"
	"github.com/lakefed/lakefed/internal/httpx"
)

// maxSingleCopy is the largest object one CopyObject may copy (5 GiB);
// larger ones are rewritten by a multipart copy of copyPartSize ranges.
// Variables only so tests can make them small.
var (
	maxSingleCopy int64 = MaxPartSize
	copyPartSize  int64 = 1 << 30
)

// Put stores r as p, with its adler32 in the object's user metadata.
//
// A file of at most multipart_threshold bytes is read into memory (its
// adler32 and md5 computed there) and sent in one PUT that carries both:
// the server checks the md5 (Content-MD5), and the object appears complete
// with its metadata in one step.
//
// A larger file, or one of unknown size that turns out larger, is sent as
// a multipart upload of part_size parts, one part in memory at a time (each
// with its Content-MD5), so a 6 GiB stream of unknown length needs neither
// the disk nor more than a part of memory. S3 takes user metadata only when
// an upload starts, and the adler32 is known only at its end, so once the
// upload is complete Put rewrites the object onto itself server-side
// (CopyObject with the REPLACE metadata directive, or a multipart copy with
// UploadPartCopy above 5 GiB), conditional on the ETag it just wrote. No
// bytes go over the network twice; the server copies them once. Between the
// two steps the object is visible without adler32. Should the rewrite fail,
// the complete data stays, and Put returns an error saying so (a caller
// that retries the Put repairs it).
//
// A failed upload is aborted, so nothing of it stays. When size >= 0 and r
// gives more or fewer bytes, nothing is stored and the error wraps
// ErrRefused. With size < 0 the largest file is 10000 parts. Put
// refuses p when it is a directory (one LIST, within the endpoint's
// timeout); it does not check the parents, since S3 lets a key and a
// prefix share a name.
func (e *Endpoint) Put(ctx context.Context, p string, r io.Reader, size int64) error {
	if p == "/" {
		return opErr("put", p, fmt.Errorf("%w: the root", endpoint.ErrRefused))
	}
	if err := e.notDir(ctx, p); err != nil {
		return err
	}
	k := e.key(p)
	var src io.Reader
	switch {
	case size >= 0 && size <= e.threshold:
		head, err := readUpTo(r, size+1, true)
		if err != nil {
			return opErr("put", p, fmt.Errorf("reading the data: %w", err))
		}
		if int64(len(head)) != size {
			return opErr("put", p, fmt.Errorf("%w: the data is %s the declared %d bytes", endpoint.ErrRefused, moreOrLess(int64(len(head)), size), size))
		}
		return e.putSingle(ctx, p, k, head)
	case size < 0:
		head, err := readUpTo(r, e.threshold+1, false)
		if err != nil {
			return opErr("put", p, fmt.Errorf("reading the data: %w", err))
		}
		if int64(len(head)) <= e.threshold {
			return e.putSingle(ctx, p, k, head)
		}
		src = io.MultiReader(bytes.NewReader(head), r)
	default:
		// One byte more than declared makes the upload fail.
		src = io.LimitReader(r, size+1)
	}
	return e.putMultipart(ctx, p, k, src, size)
}

// notDir returns an error wrapping ErrRefused when p is a directory (keys
// under it, or its marker).
func (e *Endpoint) notDir(ctx context.Context, p string) error {
	ctx, cancel := e.metaCtx(ctx)
	defer cancel()
	n, err := e.hasKeys(ctx, e.dirPrefix(p), 1)
	if err == nil && n == 0 {
		n, err = e.marker(ctx, p)
	}
	if err != nil {
		return e.wrap("put", p, err)
	}
	if n > 0 {
		return opErr("put", p, fmt.Errorf("%w: is a directory", endpoint.ErrRefused))
	}
	return nil
}

func moreOrLess(got, want int64) string {
	if got > want {
		return "longer than"
	}
	return "shorter than"
}

// readUpTo reads r to its end or to limit bytes, whichever is first. With
// exact set (the caller knows the length) it allocates limit bytes at
// once; otherwise the buffer grows as data comes.
func readUpTo(r io.Reader, limit int64, exact bool) ([]byte, error) {
	if exact {
		b := make([]byte, limit)
		n, err := io.ReadFull(r, b)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			err = nil
		}
		return b[:n], err
	}
	var b bytes.Buffer
	_, err := b.ReadFrom(io.LimitReader(r, limit))
	return b.Bytes(), err
}

// putSingle sends data as one PUT with its adler32 and Content-MD5.
func (e *Endpoint) putSingle(ctx context.Context, p, k string, data []byte) error {
	sum := md5.Sum(data)
	_, err := e.data.PutObject(ctx, e.bucket, k, bytes.NewReader(data), int64(len(data)),
		base64.StdEncoding.EncodeToString(sum[:]), "", minio.PutObjectOptions{
			ContentType:  "application/octet-stream",
			UserMetadata: map[string]string{metaAdler32: httpx.Adler32Of(data)},
			// Content-MD5 guards the body; SigV4's payload hash would
			// cost a second pass over it on plain http.
			DisableContentSha256: true,
		})
	return e.wrap("put", p, err)
}

// partSizeFor returns the part size for a file of size bytes (-1:
// unknown): the configured one, or larger when size needs more than
// MaxParts parts of it.
func (e *Endpoint) partSizeFor(size int64) int64 {
	ps := e.partSize
	if size > ps*MaxParts {
		ps = (size + MaxParts - 1) / MaxParts
		ps = (ps + 1<<20 - 1) &^ (1<<20 - 1) // whole MiB
	}
	return ps
}

// putMultipart streams src as a multipart upload, then stores its adler32.
func (e *Endpoint) putMultipart(ctx context.Context, p, k string, src io.Reader, size int64) (err error) {
	partSize := e.partSizeFor(size)
	if partSize > MaxPartSize {
		return opErr("put", p, fmt.Errorf("%w: %d bytes is more than S3 takes", endpoint.ErrRefused, size))
	}
	id, err := e.data.NewMultipartUpload(ctx, e.bucket, k, minio.PutObjectOptions{ContentType: "application/octet-stream"})
	if err != nil {
		return e.wrap("put", p, err)
	}
	defer func() {
		if err != nil {
			e.abort(ctx, p, k, id)
		}
	}()
	buf := make([]byte, partSize)
	h := httpx.NewAdler32()
	var parts []minio.CompletePart
	var total int64
	for num := 1; ; num++ {
		n, rerr := io.ReadFull(src, buf)
		if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
			return opErr("put", p, fmt.Errorf("reading the data: %w", rerr))
		}
		if n == 0 && len(parts) > 0 {
			break
		}
		if num > MaxParts {
			return opErr("put", p, fmt.Errorf("%w: more than %d parts of %d bytes (raise s3.part_size)", endpoint.ErrRefused, MaxParts, partSize))
		}
		total += int64(n)
		if size >= 0 && total > size {
			return opErr("put", p, fmt.Errorf("%w: the data is longer than the declared %d bytes", endpoint.ErrRefused, size))
		}
		_, _ = h.Write(buf[:n])
		sum := md5.Sum(buf[:n])
		part, err := e.data.PutObjectPart(ctx, e.bucket, k, id, num, bytes.NewReader(buf[:n]), int64(n),
			minio.PutObjectPartOptions{Md5Base64: base64.StdEncoding.EncodeToString(sum[:]), DisableContentSha256: true})
		if err != nil {
			return e.wrap("put", p, err)
		}
		parts = append(parts, minio.CompletePart{PartNumber: num, ETag: part.ETag})
		if n < len(buf) {
			break
		}
	}
	if size >= 0 && total != size {
		return opErr("put", p, fmt.Errorf("%w: the data is shorter than the declared %d bytes", endpoint.ErrRefused, size))
	}
	info, err := e.data.CompleteMultipartUpload(ctx, e.bucket, k, id, parts, minio.PutObjectOptions{})
	if err != nil {
		return e.wrap("put", p, err)
	}
	if err := e.setAdler32(ctx, k, info.ETag, total, fmt.Sprintf("%08x", h.Sum32())); err != nil {
		return e.wrap("put", p, fmt.Errorf("stored, but not its adler32: %w", err))
	}
	return nil
}

// abort drops an upload that failed, even when ctx was cancelled (that is
// often why it failed), within the endpoint's timeout. A failed abort
// leaves parts that the bucket's lifecycle rule for incomplete uploads
// removes; it is logged, since Put returns the error that caused it.
func (e *Endpoint) abort(ctx context.Context, p, k, id string) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.timeout)
	defer cancel()
	if err := e.data.AbortMultipartUpload(actx, e.bucket, k, id); err != nil {
		e.log.WarnContext(ctx, "abort multipart upload failed", "path", p, "upload_id", id, "err", err)
	}
}

// setAdler32 rewrites object k onto itself with the adler32 in its user
// metadata, if its ETag is still etag (a concurrent Put must not get the
// checksum of this one).
func (e *Endpoint) setAdler32(ctx context.Context, k, etag string, size int64, sum string) error {
	if size <= maxSingleCopy {
		_, err := e.data.CopyObject(ctx, e.bucket, k, e.bucket, k, map[string]string{
			"x-amz-metadata-directive":  "REPLACE",
			"X-Amz-Meta-" + metaAdler32: sum,
			"Content-Type":              "application/octet-stream",
		}, minio.CopySrcOptions{Bucket: e.bucket, Object: k, MatchETag: etag}, minio.PutObjectOptions{})
		return err
	}
	id, err := e.data.NewMultipartUpload(ctx, e.bucket, k, minio.PutObjectOptions{
		ContentType:  "application/octet-stream",
		UserMetadata: map[string]string{metaAdler32: sum},
	})
	if err != nil {
		return err
	}
	var parts []minio.CompletePart
	for off, num := int64(0), 1; off < size; off, num = off+copyPartSize, num+1 {
		n := min(copyPartSize, size-off)
		part, err := e.data.CopyObjectPart(ctx, e.bucket, k, e.bucket, k, id, num, off, n,
			// Quoted, as RFC 9110 writes entity tags: s3proxy compares
			// the header with the quoted form.
			map[string]string{"x-amz-copy-source-if-match": `"` + strings.Trim(etag, `"`) + `"`})
		if err != nil {
			e.abort(ctx, k, k, id)
			return err
		}
		parts = append(parts, part)
	}
	if _, err := e.data.CompleteMultipartUpload(ctx, e.bucket, k, id, parts, minio.PutObjectOptions{}); err != nil {
		e.abort(ctx, k, k, id)
		return err
	}
	return nil
}
