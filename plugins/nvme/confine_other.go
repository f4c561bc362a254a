//go:build !linux

package main

// confine: the admin ioctl and its filter are Linux's (confine_linux.go);
// elsewhere there is nothing to confine and no SMART log to read.
func confine() error { return nil }
