# The AF_XDP backend's smoke test (root and a real or veth interface needed to run it).
#   make -f xdp.mk smoke      build bin/steer.bpf.o and bin/xdp_smoke
#   make -f xdp.mk clean
# Needs: apt-get install clang llvm libbpf-dev libxdp-dev
# Run:   bin/xdp_smoke -i IFACE [-q all|0,1] [-p 53] [-t 10] [-a auto|native|generic]
#                    [-c auto|copy|zerocopy] [-b]
# SAN=1 adds AddressSanitizer and UBSan.
CC ?= cc
CLANG ?= clang
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
BIN := bin

# The BPF object: -g for the BTF that finds sp_port; the multiarch directory for
# <asm/types.h>, which Debian keeps outside /usr/include.
BPF_CFLAGS := -O2 -g -Wall -Werror -target bpf $(if $(MULTIARCH),-I/usr/include/$(MULTIARCH)) -I../include

CFLAGS ?= -std=gnu11 -O2 -g -Wall -Wextra -Wshadow -Werror -fno-omit-frame-pointer
ifeq ($(SAN),1)
CFLAGS += -fsanitize=address,undefined -fno-sanitize-recover=all
endif
# SP_WITH_XDP compiles the AF_XDP files in; SP_XDP_BPF_OBJ embeds the object (.incbin, absolute path).
XDP_DEFS := -DSP_WITH_XDP -DSP_XDP_BPF_OBJ='"$(abspath $(BIN)/steer.bpf.o)"'
XDP_LIBS := $(shell pkg-config --libs libxdp libbpf 2>/dev/null || echo -lxdp -lbpf) -lpthread

SOURCES := $(wildcard ../proto/*.c ../engine/*.c ../app/*/*.c) ../io/xdp_program.c ../io/xdp_socket.c ../io/xdp_answer.c ../io/gather.c ../io/tx_limit.c
HEADERS := $(wildcard ../include/stormpy/*.h ../include/stormpy/*/*.h ../include/stormpy/*/*/*.h ../io/*.h)

smoke: $(BIN)/steer.bpf.o $(BIN)/xdp_smoke

$(BIN)/steer.bpf.o: ../bpf/steer.bpf.c ../bpf/answer.h ../include/stormpy/io/xdp_answer.h
	@mkdir -p $(BIN)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BIN)/xdp_smoke: xdp_smoke.c $(SOURCES) $(BIN)/steer.bpf.o $(HEADERS)
	@mkdir -p $(BIN)
	$(CC) $(CFLAGS) $(XDP_DEFS) -I../include -o $@ xdp_smoke.c $(SOURCES) $(XDP_LIBS)

clean:
	rm -f $(BIN)/steer.bpf.o $(BIN)/xdp_smoke

.PHONY: smoke clean
