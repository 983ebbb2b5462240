//go:build !linux

package main

// forbidMemoryReads is Linux's PR_SET_DUMPABLE; elsewhere it does nothing.
func forbidMemoryReads() error { return nil }
