package httpx

import "context"

type bearerKey struct{}

// WithBearer returns ctx carrying the bearer token of the caller being
// served, once the auth rules accepted it; an endpoint configured to pass
// callers' tokens on (endpoint.Config.PassToken) sends it in place of its
// own credential.
func WithBearer(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, bearerKey{}, token)
}

// Bearer returns the token WithBearer stored, or "".
func Bearer(ctx context.Context) string {
	t, _ := ctx.Value(bearerKey{}).(string)
	return t
}
