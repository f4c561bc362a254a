//go:build !linux

package main

// statfs is Linux-only; elsewhere every mount is a counted failure.
func statfs(string) (fsUsage, error) { return fsUsage{}, errUnsupported }
