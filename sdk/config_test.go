package sdk_test

import (
	"testing"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/plexporter/plexporter/sdk"
)

func configWith(t *testing.T, m map[string]any) sdk.Config {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return sdk.Config{Raw: s}
}
