package config

// docs/config.md, the reference of every key, is generated from the doc
// comments of this package's structs so that it cannot drift from them;
// a test in refgen fails while the file and the comments differ.
//go:generate go run ./refgen -o ../../docs/config.md
