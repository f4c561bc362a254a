package main

// The BPF programs are compiled with clang into disk_bpfel.o and
// tcp_bpfel.o (little-endian: amd64 and arm64), which bpf2go embeds in the
// generated disk_bpfel.go and tcp_bpfel.go. All four are committed, so a
// build needs no clang; `make ebpf-generate-check` regenerates them with the
// pinned clang and fails when the committed files differ (see README.md).

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -go-package main disk bpf/disk.bpf.c
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -go-package main tcp bpf/tcp.bpf.c
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -go-package main conn bpf/conn.bpf.c
