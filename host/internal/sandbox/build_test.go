package sandbox

import (
	"strings"
	"testing"

	"kernel.org/pub/linux/libs/security/libcap/cap"
)

func TestCheckHost(t *testing.T) {
	err := CheckHost()
	if builtWithCgo {
		if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
			t.Fatalf("a cgo build must refuse to sandbox, saying how to build: %v", err)
		}
		return
	}
	if admin, _ := cap.GetProc().GetFlag(cap.Effective, cap.SYS_ADMIN); admin && err != nil {
		t.Fatalf("with CAP_SYS_ADMIN: %v", err)
	} else if !admin && (err == nil || !strings.Contains(err.Error(), "CAP_SYS_ADMIN")) {
		t.Fatalf("without CAP_SYS_ADMIN there is no PID namespace, and the refusal must say what it needs: %v", err)
	}
}
