package main

import (
	"context"
	"errors"
)

// The client commands are replaced by their real wiring.
func runCp(ctx context.Context, args []string) error    { return errors.New("not built yet") }
func runLs(ctx context.Context, args []string) error    { return errors.New("not built yet") }
func runStat(ctx context.Context, args []string) error  { return errors.New("not built yet") }
func runRm(ctx context.Context, args []string) error    { return errors.New("not built yet") }
func runMkdir(ctx context.Context, args []string) error { return errors.New("not built yet") }
