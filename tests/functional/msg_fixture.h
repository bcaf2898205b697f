/*
 * What the FI_MSG tests (test_msg.c, test_msg_ep.c) share: a domain with three endpoints of
 * one process (a and b know each other; c knows b, but b does not know c) and the checks of
 * completions they make.
 */
#ifndef TESTS_FUNCTIONAL_MSG_FIXTURE_H
#define TESTS_FUNCTIONAL_MSG_FIXTURE_H

#include "common.h"

#define KIB 1024UL
#define MIB (1024UL * KIB)
#define GIB (1024UL * MIB)

extern struct fi_info *info;
extern struct lt_dom dom;
extern struct lt_ep a, b, c;
extern fi_addr_t a_to_b, b_to_a, c_to_b;

/* Opens them (FI_MSG | FI_SOURCE, FI_ORDER_SAS), skipping without a provider: 0 or a check
 * failed. */
int msg_fixture_open(const char *prog);
void msg_fixture_close(void);

/* Waits for one completion on cq; one check line only on timeout. */
bool next_comp(struct lt_cq *cq, struct lt_comp *comp, const char *what);
/* A successful receive completion for ctx of len bytes with FI_RECV|FI_MSG. */
bool check_rx(const struct lt_comp *comp, void *ctx, size_t len, const char *what);
/* Waits for the send completion of ctx and checks it. */
bool wait_tx(struct lt_ep *ep, void *ctx, const char *what);
/* Nothing left over on any CQ: no duplicate or stray completions from a section. */
void check_no_stray(const char *section);

#endif /* TESTS_FUNCTIONAL_MSG_FIXTURE_H */
