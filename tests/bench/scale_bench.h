/*
 * fi_scale_bench: what the main process and the processes it forks share, and what crosses
 * from one file to another.
 *
 * fi_scale_bench.c      the main process: options, the measurement runs and the churn cycles
 * scale_bench_procs.c   the children as the main process sees them: spawning, commands,
 *                       records, reaping
 * scale_bench_report.c  the tables: medians, ratios, CSV, churn's verdict
 * scale_bench_fab.c     what the children share: fi_info, fabric, domain, endpoints, records
 * scale_bench_server.c  the server's process: one endpoint serving the N peers
 * scale_bench_client.c  a client process: an endpoint per peer
 *
 * The main process and each child talk through two pipes: one-byte commands down, fixed-size
 * records (struct scale_rec, one write() each, below PIPE_BUF so never torn) up.
 */
#ifndef FI_SCALE_BENCH_H
#define FI_SCALE_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>

#include "bench_util.h"

#define SCALE_NAME "fi_scale_bench"
#define SCALE_DEFAULT_PROVS "tcp;ofi_layer,tcp;ofi_rxm"
#define SCALE_DEFAULT_COUNTS "1,64,256,1024"

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

/* ---------------------------------------------------------------- the main process: results */

/* The figures of a measurement run: the table's columns. */
enum fig { FIG_CONN, FIG_KIB, FIG_FDS, FIG_LAT, NFIGS };

enum cell_state { CELL_OK, CELL_NA, CELL_FAILED, CELL_FD_LIMIT };

/* One provider at one N, across repeats. */
struct cell {
	enum cell_state state;
	int nsamples;
	double v[SCALE_MAX_REPEATS][NFIGS];
	int repeat[SCALE_MAX_REPEATS]; /* the repeat each sample comes from */
};

/* Churn: row 0 is the baseline, row c the state after cycle c. */
struct churn_row {
	double conn_s;
	double fds_conn; /* with the cycle's peers connected */
	double fds;
	double rss;
	double cq_errors;
	double settle_s;
};

/* fi_scale_bench.c: what the runs found (scale_bench_report.c prints it). */
extern struct cell cells[SCALE_MAX_COUNTS][SCALE_MAX_PROVS];
extern bool prov_unavail[SCALE_MAX_PROVS];
extern struct churn_row churn_rows[SCALE_MAX_PROVS][SCALE_MAX_CYCLES + 1];
extern unsigned churn_done[SCALE_MAX_PROVS]; /* cycles completed */
extern bool churn_failed[SCALE_MAX_PROVS];
extern bool churn_started[SCALE_MAX_PROVS]; /* the baseline came */

/* fi_scale_bench.c: how many CPUs we may run on; the two the server and the awake client get. */
extern int bench_cpus[2]; /* the server's and the awake client's */
extern int ncpus;

/* scale_bench_report.c */
void print_measure_table(void);
void print_churn_table(void);

/* ---------------------------------------------------------------- the main process: children */

enum kid_kind { KID_SERVER, KID_AWAKE, KID_IDLE };

struct kid {
	enum kid_kind kind;
	char role[32];
	pid_t pid;
	int cmd_fd; /* to the child; -1 once closed */
	int rep_fd; /* from the child; -1 once closed */
	bool reaped;
	int status;
	bool got; /* the record awaited came */
	double t_got;
	struct scale_rec rec;
};

/* The children of the run under way; the server, when there is one, first. */
extern struct kid kids[SCALE_MAX_PROCS + 2];
extern int nkids;
extern struct scale_run run; /* what they inherit */
extern pid_t main_pid;

/* The children a command or a wait is for. */
enum target { T_SERVER, T_CLIENTS, T_AWAKE };

/* What await() and the steps of a run return: the record came, or why not. */
enum { AWAIT_OK = 0, AWAIT_FAIL = -1, AWAIT_UNAVAIL = -2 };

/* scale_bench_procs.c */
rlim_t raise_fd_limit(void);
struct kid *spawn(enum kid_kind kind, size_t nep, int index);
int send_cmd(enum target t, char cmd, char *why, size_t len);
int await(enum target t, int want, double deadline, char *why, size_t len);
int await_exit(enum target t, double deadline, char *why, size_t len);
void end_all(void);
int spawn_clients(size_t npeers, bool with_awake);
double connect_clients(double deadline, char *why, size_t len);

/* ---------------------------------------------------------------- the children */

/* The kind of operation behind a completion. */
enum op_kind { OP_HELLO_RX, OP_ACK_TX, OP_PING_RX, OP_PONG_TX, OP_CLIENT_TX, OP_CLIENT_RX };

/* The provider's FI_CONTEXT space first: a completion's op_context is the op itself. */
struct op {
	struct fi_context ctx;
	enum op_kind kind;
	size_t idx; /* hello receives: the window slot */
	bool busy;  /* pong sends: posted, not completed */
};

/* A peer's first message: its name, so that the server can insert it. */
struct hello {
	uint32_t flags; /* HELLO_AWAKE: the peer that will ping */
	uint32_t addrlen;
	char addr[SCALE_ADDR_MAX];
};
#define HELLO_AWAKE 1u
#define HELLO_HDR offsetof(struct hello, addr)

/* One process's fabric and domain, and the one region all its buffers live in. */
struct proc_fab {
	const char *prov;
	const char *role; /* "server", "client 3", ... for messages */
	int rep_fd;
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_mr *mr; /* FI_MR_LOCAL: the region */
	void *desc;
	char *region;
	size_t region_size;
};

/* scale_bench_fab.c */
void fab_err(const struct proc_fab *f, const char *call, int ret);
void send_rec(const struct proc_fab *f, struct scale_rec *rec);
void report(const struct proc_fab *f, enum scale_rec_type type);
int proc_fab_open(struct proc_fab *f, size_t region_size);
void proc_fab_close(struct proc_fab *f);
int open_ep(struct proc_fab *f, size_t av_count, size_t cq_size, struct fid_av **av,
	    struct fid_cq **cq, struct fid_ep **ep);
void close_ep(struct fid_av *av, struct fid_cq *cq, struct fid_ep *ep);
int read_cq_error(const struct proc_fab *f, struct fid_cq *cq, struct fi_cq_err_entry *err);

/* scale_bench_server.c, scale_bench_client.c: the body of each child; the process's exit status. */
int scale_server_main(const struct scale_run *run, int cmd_fd, int rep_fd);
int scale_client_main(const struct scale_run *run, const char *role, size_t nep, bool awake,
		      int cmd_fd, int rep_fd);

#endif /* FI_SCALE_BENCH_H */
