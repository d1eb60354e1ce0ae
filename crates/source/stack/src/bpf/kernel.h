/* The kernel types the stack programs read, cut down to the fields they
 * use. preserve_access_index makes every access a CO-RE relocation: libbpf
 * finds each field by name in the running kernel's BTF at load time, so
 * offsets here need not match any particular kernel (a full vmlinux.h is
 * 130 000 lines and ties the build to the build host's kernel). */
#ifndef WEIR_KERNEL_H
#define WEIR_KERNEL_H

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef signed int s32;
typedef signed long long s64;

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct in6_addr {
	union {
		__u8 u6_addr8[16];
		__be32 u6_addr32[4];
	} in6_u;
};

struct ns_common {
	unsigned int inum;
};

struct net {
	struct ns_common ns;
};

typedef struct {
	struct net *net;
} possible_net_t;

typedef struct {
	s64 counter;
} atomic64_t;

struct sock_common {
	__be32 skc_daddr;
	__be32 skc_rcv_saddr;
	__be16 skc_dport;
	__u16 skc_num;
	unsigned short skc_family;
	volatile unsigned char skc_state;
	possible_net_t skc_net;
	struct in6_addr skc_v6_daddr;
	struct in6_addr skc_v6_rcv_saddr;
	atomic64_t skc_cookie;
	unsigned long skc_flags; /* sk_flags (in an anonymous union) */
};

struct kernfs_node {
	u64 id;
};

struct cgroup {
	struct kernfs_node *kn;
};

struct sock_cgroup_data {
	struct cgroup *cgroup;
};

struct sock {
	struct sock_common __sk_common;
	u16 sk_protocol;
	u16 sk_type;
	struct sock_cgroup_data sk_cgrp_data;
};

struct tcp_sock {
	u32 snd_wnd;
	u32 snd_cwnd;
	u32 lost_out;
	u32 sacked_out;
	u32 copied_seq;
	u32 retrans_out;
	u32 snd_ssthresh;
	u32 write_seq;
	u32 mdev_us;
	u32 rcv_nxt;
	u32 snd_nxt;
	u32 snd_una;
	u32 srtt_us;
	u32 packets_out;
	u32 rcv_wnd;
	u32 total_retrans;
	/* What tcp_info reports, for the walk level. */
	u64 bytes_sent;
	u64 bytes_received;
	u64 bytes_acked;
	u64 bytes_retrans;
	u32 segs_in;
	u32 segs_out;
	u32 data_segs_in;
	u32 data_segs_out;
	u16 total_rto; /* from 6.7; checked with bpf_core_field_exists */
	u32 mss_cache;
	u32 rate_delivered;
	u32 rate_interval_us;
	u32 chrono_start;
	u32 chrono_stat[3];
	u8 chrono_type; /* a whole byte in 6.x */
};

struct net_device {
	int ifindex;
	possible_net_t nd_net;
	char name[16];
};

struct sk_buff {
	struct sock *sk;
	struct net_device *dev;
	char cb[48];
	unsigned int len;
	__be16 protocol;
	__u16 transport_header;
	__u16 network_header;
	__u16 mac_header;
	unsigned char *head;
	unsigned char *data;
};

struct seq_file;

struct bpf_iter_meta {
	struct seq_file *seq;
	u64 session_id;
	u64 seq_num;
};

struct bpf_iter__tcp {
	struct bpf_iter_meta *meta;
	struct sock_common *sk_common;
	u32 uid;
};

struct bpf_map;

struct bpf_iter__bpf_sk_storage_map {
	struct bpf_iter_meta *meta;
	struct bpf_map *map;
	struct sock *sk;
	void *value;
};

#pragma clang attribute pop

#endif
