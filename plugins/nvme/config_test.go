package main

import (
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/plexporter/plexporter/sdk"
	"github.com/plexporter/plexporter/sdk/metricfilter"
)

func sdkConfig(t testing.TB, raw map[string]any) sdk.Config {
	t.Helper()
	return sdkConfigAt(t, t.TempDir(), raw)
}

func sdkConfigAt(t testing.TB, sysfs string, raw map[string]any) sdk.Config {
	t.Helper()
	s, err := structpb.NewStruct(raw)
	if err != nil {
		t.Fatal(err)
	}
	f, err := metricfilter.New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return sdk.Config{Raw: s, Filter: f, Paths: sdk.Paths{Sysfs: sysfs, Procfs: "/proc", Rootfs: "/"}}
}
