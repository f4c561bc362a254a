package main

// The BPF programs are compiled with clang into <group>_bpfel.o
// (little-endian: amd64 and arm64) for the disk, tcp, nfs and rtt groups,
// and per architecture into conn_x86_bpfel.o and conn_arm64_bpfel.o (the
// connection group's kprobes read their arguments from registers, whose
// names depend on the architecture), which bpf2go embeds in the generated
// .go files of the same names. All are
// committed, so a build needs no clang; `make ebpf-generate-check`
// regenerates them with the pinned clang and fails when the committed
// files differ (see README.md).

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -go-package main disk bpf/disk.bpf.c
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -go-package main tcp bpf/tcp.bpf.c
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target amd64,arm64 -go-package main conn bpf/conn.bpf.c
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -go-package main nfs bpf/nfs.bpf.c
//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -go-package main rtt bpf/rtt.bpf.c
