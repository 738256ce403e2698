package main

import (
	"context"
	"errors"
)

// runStorage is replaced by the storage role's wiring.
func runStorage(ctx context.Context, args []string) error { return errors.New("not built yet") }
