/*
 * test_loss (test_loss.c: the data mode, the stream of messages both ways, the two processes)
 * and its silent mode (test_loss_silent.c): what both files share.
 */
#ifndef LAYER_TEST_LOSS_H
#define LAYER_TEST_LOSS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tests/functional/common.h"

/* Operations outstanding at once, each way. */
#define WINDOW 16
/* Room after each receive buffer, so that a message too long shows as a wrong length. */
#define SLACK 64
#define DEF_COUNT 200
#define DEF_DEADLINE_S 100
/* How much longer than the deadline one process waits for the other at the end. */
#define SYNC_SLACK_MS 10000
/* Failure lines printed per exchange; the counts in the summary checks say the rest. */
#define MAX_REPORTS 10

/* Silent mode: messages each way before and after the partition (every size once). */
#define SILENT_COUNT 11
#define DEF_PEER_TIMEOUT_MS 2000
/* The exchange after the partition uses tags of its own, and so do the two lost messages. */
#define AFTER_BASE (UINT64_C(1) << 32)
/* Time for the exchange after the partition: 4 peer timeouts and this. */
#define AFTER_SLACK_MS 20000
#define TAG_SMALL (UINT64_C(1) << 48)
#define TAG_BIG (TAG_SMALL + 1)
#define TAG_AGAIN (TAG_SMALL + 2)
#define SMALL_LEN 8
#define BIG_LEN (1 << 20)

/* Settings read once from the environment. */
struct loss_cfg {
	const char *mode;	  /* "data" or "silent" */
	unsigned count;		  /* messages each way */
	unsigned deadline_s;	  /* for the whole run */
	size_t max_len;		  /* largest message: 1 MiB, or max_msg_size if less */
	unsigned peer_timeout_ms; /* silent mode: FI_OFI_LAYER_PEER_TIMEOUT */
	const char *table;	  /* silent mode: "inet ltloss" */
	const char *chain;	  /* silent mode: "i" */
};
extern struct loss_cfg cfg;

/* One send or receive in flight. */
struct op {
	struct fi_context2 ctx; /* the completion's op_context */
	char *buf;
	uint64_t seq; /* message number within the exchange */
	bool is_busy; /* posted, not yet completed */
};

/* One exchange: count messages to the peer and count from it, at the same time. */
struct stream {
	const char *who; /* "parent" or "child": the prefix of its check lines */
	struct lt_ep *ep;
	fi_addr_t peer;
	uint64_t base; /* tag and pattern seed of message 0 */
	unsigned count;
	struct op tx[WINDOW], rx[WINDOW];
	struct op *tx_staged, *rx_staged; /* prepared for the next post that said -FI_EAGAIN */
	unsigned tx_next, rx_next;	  /* next message number to post */
	unsigned tx_done, rx_done;	  /* completions taken, good or bad */
	unsigned tx_ok, rx_ok;		  /* completions that passed every check */
	unsigned reports;		  /* failure lines printed */
};

/* test_loss.c */
/* Message seq's length: the sizes cycled, at most cfg.max_len. */
size_t msg_len(uint64_t seq);
/* The pipe between the processes, read while progressing; a word said and awaited. */
ssize_t recv_progressing(int fd, void *buf, size_t max, int timeout_ms);
int say(int fd, const char *word);
bool await(int fd, const char *word, int timeout_ms);
/* Both processes tell each other whether their checks passed: true if the peer's did. */
bool sync_both(int rfd, int wfd, int timeout_ms);
int ms_left(uint64_t deadline);
int stream_init(struct stream *s, const char *who, struct lt_ep *ep, fi_addr_t peer,
		uint64_t base, unsigned count);
void stream_fini(struct stream *s);
/* Runs the exchange until done or the deadline, checking everything: true if done. */
bool stream_run(struct stream *s, uint64_t deadline);

/* test_loss_silent.c */
bool is_plain_name(const char *s);
/* This process runs inside the network namespace run_loss.sh made (LT_NETNS). */
bool in_loss_netns(void);
void silent_parent(struct lt_ep *ep, fi_addr_t peer, struct lt_child *child,
		   uint64_t deadline);
void silent_child(struct lt_ep *ep, fi_addr_t peer, int rfd, int wfd, uint64_t deadline);

#endif /* LAYER_TEST_LOSS_H */
