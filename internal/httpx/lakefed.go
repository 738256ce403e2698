package httpx

import "context"

// The protocol lakefed federators speak to each other, over plain HTTP:
// both sides (the federator that answers, the upstream kind that asks)
// read it from here, so the federator need not import a kind to answer
// one.

// HopsHeader carries how many federators a request has passed through; a
// federator reached at max_hops asks no upstream, so a hierarchy with a
// cycle cannot loop.
const HopsHeader = "X-Lakefed-Hops"

// PathUnavailableHeader marks a federator's 503 that is about one path
// (every endpoint that could hold it is down or did not answer), not
// about the federator itself: the federator answered. Its value names
// the endpoints that failed.
const PathUnavailableHeader = "X-Lakefed-Path-Unavailable"

// ConditionalPutHeader is in a lakefed storage role's OPTIONS answer,
// with the value "atomic": it evaluates a PUT's If-Match and
// If-None-Match (RFC 9110 §13.1.1, §13.1.2) under the path's lock, with
// the rename that commits the upload, so the http kind may offer
// conditional writes on it (endpoint.ConditionalPutter). Servers that do
// not say so are not asked: nginx's dav module and XrdHttp ignore these
// headers on PUT and would replace whatever is there.
const ConditionalPutHeader = "X-Lakefed-Conditional-Put"

// EmptyDeleteHeader, with the value "empty", asks a lakefed storage role
// to DELETE a collection only if it is empty, in one step (rmdir(2)),
// and answer 409 otherwise: WebDAV's DELETE of a collection removes the
// whole tree (RFC 4918 §9.6.1), so a client that checked the collection
// was empty and then deleted it would also remove a file written in
// between. Other servers ignore the header.
const EmptyDeleteHeader = "X-Lakefed-Delete"

// DirType is the Content-Type a lakefed federator gives a directory on
// HEAD (the convention of Apache mod_dav and others).
const DirType = "httpd/unix-directory"

type hopsKey struct{}

// WithHops returns ctx carrying the hop count of the request being served;
// an upstream endpoint asked with it sends hops+1.
func WithHops(ctx context.Context, hops int) context.Context {
	return context.WithValue(ctx, hopsKey{}, hops)
}

// Hops returns the hop count WithHops stored, or 0.
func Hops(ctx context.Context) int {
	h, _ := ctx.Value(hopsKey{}).(int)
	return h
}

// StorageServer is the Server header of a lakefed storage role. Its
// entity tags are strong (they hold the inode and the change time, not
// only the modification time and the size, RFC 9110 §8.8.1), and the
// http kind believes a tag strong only of a server that says this.
const StorageServer = "lakefed-storage"

// ListedAsHeadHeader is set, to "1", on a storage role's answer to a
// PROPFIND Depth 1 whose every member is what a HEAD of its path by the
// same caller would answer: described with the HEAD's size, time and
// entity tag, or given the HEAD's refusal as its status. Only such a
// listing may stand for a HEAD per member (endpoint.StatLister); one
// without it may describe a file its caller may not read, or leave out
// one a HEAD would refuse rather than call missing.
const ListedAsHeadHeader = "Lakefed-Listed-As-Head"
