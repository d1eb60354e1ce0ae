// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A lossy link for tests: a tc classifier that drops about DROP_PERMILLE
 * of every thousand frames at random. netem is not in every kernel (it is
 * not in the test machines'); tc-BPF is. Built by the test with clang and
 * attached with `tc filter add dev IF ingress bpf da obj lossy.o sec tc`
 * (on ingress: a drop on the sender's own egress is reported to TCP). */
#include <linux/bpf.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>

#ifndef DROP_PERMILLE
#define DROP_PERMILLE 20
#endif

SEC("tc")
int lossy(struct __sk_buff *skb)
{
	if (bpf_get_prandom_u32() % 1000 < DROP_PERMILLE)
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
