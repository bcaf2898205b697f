/*
 * fi_scale_bench: what the main process and the processes it forks share.
 *
 * fi_scale_bench.c    the main process: options, the runs (forks, commands, records), tables
 * scale_bench_peer.c  the children: the server's endpoint, the clients' endpoints
 *
 * The main process and each child talk through two pipes: one-byte commands down, fixed-size
 * records (struct scale_rec, one write() each, below PIPE_BUF so never torn) up.
 */
#ifndef FI_SCALE_BENCH_H
#define FI_SCALE_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>

#include "bench_util.h"

#define SCALE_NAME "fi_scale_bench"
#define SCALE_DEFAULT_PROVS "tcp;ofi_layer,tcp;ofi_rxm"
#define SCALE_DEFAULT_COUNTS "1,64,256,1024"
#define SCALE_NODE "127.0.0.1"
#define SCALE_API FI_VERSION(1, 17)

#define SCALE_MAX_PROVS 8
#define SCALE_MAX_COUNTS 16
#define SCALE_MAX_PEERS 65536
#define SCALE_MAX_PROCS 1024 /* idle client processes of one run */
#define SCALE_MAX_REPEATS 100
#define SCALE_MAX_CYCLES 1000
#define SCALE_PROV_LEN 64
#define SCALE_ADDR_MAX 256 /* an endpoint name, as fi_getname gives it */

#define SCALE_DEFAULT_PROCS 16
#define SCALE_DEFAULT_REPEATS 3
#define SCALE_DEFAULT_ITERS 10000
#define SCALE_DEFAULT_TIMEOUT 120
/* ping-pong: the latency is the median of this many timed batches, each iters / BATCHES */
#define SCALE_BATCHES 5

/* Churn: after removing a cycle's peers the server progresses until its fds are back within
 * 10% of its baseline, or this long. */
#define SCALE_SETTLE_S 30

/*
 * What a run may need of RLIMIT_NOFILE. A client endpoint over libfabric 1.17's tcp holds 9
 * descriptors, with tcp;ofi_layer as with tcp;ofi_rxm (measured): its listening socket, its
 * connection, an epoll set and three socket pairs the tcp core signals through. The server
 * holds one per peer (the connection); 3 leaves room for providers that poll per peer.
 * SPARE covers the libraries, stdio and the pipes.
 */
#define SCALE_FDS_PER_CLIENT_PEER 10
#define SCALE_FDS_PER_SERVER_PEER 3
#define SCALE_FDS_SPARE 64

/* The tags of the four messages; any constants, distinct in their low bits too. */
#define SCALE_TAG_HELLO 0x5343414c0001ULL
#define SCALE_TAG_ACK 0x5343414c0002ULL
#define SCALE_TAG_PING 0x5343414c0003ULL
#define SCALE_TAG_PONG 0x5343414c0004ULL

/* Commands from the main process, one byte each. */
#define CMD_GO 'g'	/* clients: send the hellos */
#define CMD_PING 'p'	/* the awake client: run the ping-pong */
#define CMD_EXIT 'x'	/* clients: close the endpoints and exit */
#define CMD_MEASURE 'm' /* server: once every peer is served, RSS and fds */
#define CMD_LEAVING 'q' /* server: the peers are about to leave; CQ errors are expected now */
#define CMD_REMOVE 'r'	/* server, churn: they are gone; fi_av_remove them, settle, report */
#define CMD_STOP 's'	/* server: close and exit */

enum scale_rec_type {
	REC_FAIL,      /* the child gives up; it said why on stderr */
	REC_UNAVAIL,   /* server: fi_getinfo offers no such endpoint; text says what it offers */
	REC_ADDR,      /* server: enabled; addr, and the baseline RSS and fds */
	REC_READY,     /* client: endpoints enabled, the server inserted */
	REC_CONNECTED, /* client: every endpoint's hello answered */
	REC_MEASURED,  /* server: every peer served; RSS and fds */
	REC_LEAVING,   /* server: its fds with every peer still there */
	REC_LATENCY,   /* the awake client: one-way microseconds of each batch */
	REC_CYCLE,     /* server, churn: RSS and fds once the cycle's peers were removed */
};

/* Indices into scale_rec.v */
enum {
	V_RSS = 0,	 /* bytes resident, after malloc_trim(0) */
	V_FDS = 1,	 /* open descriptors */
	V_CQ_ERRORS = 2, /* REC_CYCLE: error completions read so far */
	V_SETTLE_S = 3,	 /* REC_CYCLE: seconds from fi_av_remove to the measurement */
	V_NVALUES = 8,	 /* REC_LATENCY uses v[0 .. SCALE_BATCHES - 1] */
};

struct scale_rec {
	int32_t type; /* enum scale_rec_type */
	uint32_t addrlen;
	double v[V_NVALUES];
	char text[SCALE_PROV_LEN]; /* REC_ADDR: the provider's name; REC_UNAVAIL: why */
	char addr[SCALE_ADDR_MAX];
};

struct scale_opts {
	const char *provs[SCALE_MAX_PROVS];
	int nprovs;
	size_t counts[SCALE_MAX_COUNTS]; /* N */
	int ncounts;
	size_t procs; /* idle client processes at most */
	int repeats;
	size_t iters;	  /* timed ping-pong round trips */
	unsigned timeout; /* seconds per run (churn: per cycle) */
	unsigned churn;	  /* cycles; 0: the measurement runs */
	bool csv;
	bool pin;
	bool verbose;
};

/* What the children of one run need to know, inherited through fork(). */
struct scale_run {
	const char *prov;
	size_t npeers;	 /* N: peers served per run, or per cycle */
	unsigned cycles; /* churn cycles; 0: one measurement run */
	char server_addr[SCALE_ADDR_MAX];
	size_t server_addrlen;
};

extern struct scale_opts opt;

/* scale_bench_peer.c: the body of each child; the exit status of the process. */
int scale_server_main(const struct scale_run *run, int cmd_fd, int rep_fd);
int scale_client_main(const struct scale_run *run, const char *role, size_t nep, bool awake,
		      int cmd_fd, int rep_fd);

#endif /* FI_SCALE_BENCH_H */
