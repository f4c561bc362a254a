//go:build !linux

package main

// pinned is a no-op where there is no procfs or Landlock.
type pinned []int

func pin(...string) pinned { return nil }

func (pinned) release() {}
