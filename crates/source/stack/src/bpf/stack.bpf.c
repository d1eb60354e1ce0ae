// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* weir stack: the host's own network stack, per socket, from the
 * application's send and receive down to the device.
 *
 * Only attach types this project's target kernels allow under lockdown are
 * used: BTF tracepoints (tp_btf), sock_ops on a cgroup and the iter/tcp
 * iterator; no kprobes, no fentry. Every event goes through one BPF ring
 * buffer; a reservation that fails is counted per event type in `lost`, so
 * nothing is lost silently.
 *
 * By default (`walk`) nothing runs on the packet path: every interval
 * user space runs the iter/tcp walk (`walk_tcp`), which reads each TCP
 * socket's own counters and state (what tcp_info reports), and a socket
 * that reaches CLOSE leaves its final counters in `finals` (so one that
 * opened and closed between two walks is counted too); state changes and
 * retransmissions stay records. With `--with-device` (`aggregate`) the
 * frequent events (application send and receive, incoming segments,
 * device frames) add to their socket's per-CPU aggregate (`aggs`), which
 * user space reads every interval, and `--with-delay` adds the
 * write-to-wire delay to them. With `--events all` every event is a
 * record, as before aggregation existed. */

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

#include "kernel.h"
#include "event.h"

#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define TCP_ESTABLISHED 1
#define TCP_SYN_SENT 2
#define TCP_CLOSE 7
#define TCP_TIME_WAIT 6
#define TCP_NEW_SYN_RECV 12
#define EAGAIN 11
#define MAX_PORTS 8

/* Settings, fixed before load (user space writes .rodata). */
const volatile __u32 filter_pid = 0;     /* 0: any */
const volatile __u8 filter_comm_on = 0;
const volatile char filter_comm[16] = {};
const volatile __u64 filter_cgroup = 0;  /* cgroup v2 id; 0: any */
const volatile __u32 filter_ports_n = 0;
const volatile __u16 filter_ports[MAX_PORTS] = {};
const volatile __u64 wakeup_bytes = 0;   /* wake the reader once this much is queued */
const volatile __u8 want_dev = 1;        /* device events on */
const volatile __u8 want_dev_acks = 1;   /* ... for pure ACKs too */
const volatile __u8 aggregate = 0;       /* per-packet aggregates: see above */
const volatile __u8 want_delay = 1;      /* ... with the write-to-wire delay */
const volatile __u8 walk = 0;            /* the iter/tcp walk every interval */

/* The kernel's tick rate, for tcp_info's busy and limited times (kept in
 * jiffies); 0 when libbpf cannot find the kernel's configuration. */
extern unsigned int CONFIG_HZ __kconfig __weak;

/* The interval user space is collecting; it starts the next one before it
 * reads this one's minima and maxima (struct sock_agg). */
volatile __u64 epoch = 1;

/* One ring buffer per CPU, each created and sized by user space and put
 * in this array at the CPU's index: programs on different CPUs never
 * contend for one ring's lock and producer position, which on two CPUs
 * cost a third of every event. User space merges the rings by time. */
struct ring {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096); /* a template: the rings' sizes may differ */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1); /* set to the possible CPUs before load */
	__type(key, __u32);
	__array(values, struct ring);
} rings SEC(".maps");

/* Failed reservations per event type. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, EV_TYPES);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

/* Sockets that passed the pid/comm/cgroup filter in process context;
 * events in softirq context (where the current task is whoever happened to
 * run) are kept for these sockets only. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u8);
} tracked SEC(".maps");

/* Sockets that passed the port filter at a state change: a socket moving
 * to CLOSE has already given its local port back (the kernel unhashes it
 * before it records the new state), so its last state change is matched
 * here instead of by port. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u8);
} port_ok SEC(".maps");

/* Per socket (cookie), per CPU: what the frequent events add up to. No
 * preallocation: memory only for the sockets there are; a full map
 * (max_entries, set by user space) is counted in lost[EV_INTERVAL]. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct sock_agg);
} aggs SEC(".maps");

/* The walk level: sockets that reached CLOSE since user space last
 * looked, with their final counters (read and deleted every interval).
 * A full map is counted in lost[EV_INTERVAL]. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct sock_walk);
} finals SEC(".maps");

/* The walk level's sockets: every TCP socket that reached ESTABLISHED
 * while recording, and those already open when it started (enrolled by
 * one iter/tcp pass per namespace). The walk iterates this map, not the
 * kernel's socket tables: its cost is the sockets it follows, in every
 * namespace at once, where an iter/tcp pass scans every bucket of the
 * whole established table once per namespace. */
struct walk_state {
	__u32 write_seq;  /* write_seq and copied_seq at ESTABLISHED */
	__u32 copied_seq;
	__u16 lport;      /* a socket at CLOSE has given its local port back */
	__u8 started;     /* seen at ESTABLISHED: the two above are set */
	__u8 reported;    /* a record of it was written */
	__u8 last_state;  /* what the last record said, to skip an unchanged */
	__u8 pad[3];      /* socket (user space keeps its last record) */
	__u32 last_segs_in;
	__u32 last_segs_out;
	__u32 last_write_seq;
	__u32 last_copied_seq;
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct walk_state);
} starts SEC(".maps");

/* A walk record is built here (the programs' stacks are small). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sock_walk);
} walk_scratch SEC(".maps");

/* Zeros to insert a new aggregate from (too large for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sock_agg);
} agg_zero SEC(".maps");

/* A socket by namespace and 4-tuple, for frames received at the device:
 * the kernel has not looked their socket up yet there. */
struct tuple_key {
	__u8 laddr[16];
	__u8 raddr[16];
	__u32 netns;
	__u16 lport;
	__u16 rport;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct tuple_key);
	__type(value, __u64);
} tuples SEC(".maps");

/* Per socket, shared by the CPUs: the write whose transmission is awaited
 * and how far transmission has got. Socket storage goes with its socket. */
struct wire_state {
	__u64 pending_ts;   /* when the awaited write returned */
	__u64 sent_ts;      /* when max_end was reached */
	__u32 pending_seq;  /* the awaited write's end (write_seq) */
	__u32 max_end;      /* the furthest segment end transmitted */
	__u8 pending;
	__u8 have_end;
	__u8 pad[6];
};

struct {
	__uint(type, BPF_MAP_TYPE_SK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct wire_state);
} wire SEC(".maps");

static __always_inline int task_filter_on(void)
{
	return filter_pid || filter_comm_on || filter_cgroup;
}

/* Does the current task pass the pid/comm/cgroup filter? */
static __always_inline int task_passes(void)
{
	if (filter_pid && (bpf_get_current_pid_tgid() >> 32) != filter_pid)
		return 0;
	if (filter_cgroup && bpf_get_current_cgroup_id() != filter_cgroup)
		return 0;
	if (filter_comm_on) {
		char comm[16];
		bpf_get_current_comm(comm, sizeof(comm));
		for (int i = 0; i < 16; i++) {
			if (comm[i] != filter_comm[i])
				return 0;
			if (comm[i] == 0)
				break;
		}
	}
	return 1;
}

static __always_inline int ports_pass(__u16 a, __u16 b)
{
	if (filter_ports_n == 0)
		return 1;
	for (int i = 0; i < MAX_PORTS; i++) {
		if (i >= filter_ports_n)
			break;
		if (filter_ports[i] == a || filter_ports[i] == b)
			return 1;
	}
	return 0;
}

static __always_inline void count_lost(__u32 type)
{
	__u64 *n = bpf_map_lookup_elem(&lost, &type);
	if (n)
		*n += 1;
}

/* `size` bytes of this CPU's ring; the verifier holds every write to it. */
static __always_inline struct event *reserve_bytes(__u32 type, __u64 size)
{
	__u32 cpu = bpf_get_smp_processor_id();
	void *ring = bpf_map_lookup_elem(&rings, &cpu);
	struct event *e = ring ? bpf_ringbuf_reserve(ring, size, 0) : 0;
	if (!e)
		count_lost(type);
	return e;
}

/* A whole record, zeroed, with its header filled in. */
static __always_inline struct event *reserve(__u32 type)
{
	struct event *e = reserve_bytes(type, sizeof(struct event));
	if (!e)
		return 0;
	__builtin_memset(e, 0, sizeof(*e));
	e->type = type;
	e->ts_ns = bpf_ktime_get_ns();
	__u64 pt = bpf_get_current_pid_tgid();
	e->pid = pt >> 32;
	e->tid = (__u32)pt;
	/* Only send, receive and connect run in the owner's context; the
	 * other events get their owner in user space. */
	if (type == EV_SEND || type == EV_RECV || type == EV_STATE)
		bpf_get_current_comm(e->comm, sizeof(e->comm));
	return e;
}

/* Batch wake-ups: the reader polls on a short timer anyway, so waking it
 * for every event would only cost both sides a context switch. */
static __always_inline void submit(struct event *e)
{
	__u32 cpu = bpf_get_smp_processor_id();
	void *ring = bpf_map_lookup_elem(&rings, &cpu);
	__u64 flags = BPF_RB_NO_WAKEUP;
	if (ring && bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA) >= wakeup_bytes)
		flags = BPF_RB_FORCE_WAKEUP;
	bpf_ringbuf_submit(e, flags);
}

static __always_inline void v4_mapped(__u8 *dst, __be32 a)
{
	__builtin_memset(dst, 0, 10);
	dst[10] = 0xff;
	dst[11] = 0xff;
	__builtin_memcpy(dst + 12, &a, 4);
}

static __always_inline __u64 sock_cookie(struct sock *sk)
{
	return bpf_get_socket_cookie(sk);
}

/* The socket's identity: addresses, ports, family, protocol, netns. */
static __always_inline int fill_sock(struct event *e, struct sock *sk)
{
	__u16 family = sk->__sk_common.skc_family;
	if (family != AF_INET && family != AF_INET6)
		return 0;
	e->family = family;
	e->proto = sk->sk_protocol;
	e->state = sk->__sk_common.skc_state;
	e->netns = sk->__sk_common.skc_net.net->ns.inum;
	e->lport = sk->__sk_common.skc_num;
	e->rport = bpf_ntohs(sk->__sk_common.skc_dport);
	if (family == AF_INET) {
		v4_mapped(e->laddr, sk->__sk_common.skc_rcv_saddr);
		v4_mapped(e->raddr, sk->__sk_common.skc_daddr);
	} else {
		BPF_CORE_READ_INTO(&e->laddr, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8);
		BPF_CORE_READ_INTO(&e->raddr, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr8);
	}
	return 1;
}

/* MAGNeT's "TCP extra data": congestion and flow control state. The
 * socket's fields are read with plain loads (BTF pointers: the verifier
 * makes them fault-safe), not a helper call per field. */
static __always_inline struct tcp_sock *fill_tcp(struct event *e, struct sock *sk)
{
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);
	if (!tp)
		return 0;
	e->tcp = 1;
	e->snd_cwnd = tp->snd_cwnd;
	e->ssthresh = tp->snd_ssthresh;
	e->srtt_us = tp->srtt_us >> 3;
	e->rttvar_us = tp->mdev_us >> 2;
	e->snd_wnd = tp->snd_wnd;
	e->rcv_wnd = tp->rcv_wnd;
	e->snd_nxt = tp->snd_nxt;
	e->snd_una = tp->snd_una;
	__u32 out = tp->packets_out;
	__u32 left = tp->sacked_out + tp->lost_out;
	e->packets_out = out;
	/* tcp_packets_in_flight(): out - (sacked + lost) + retransmitted */
	e->in_flight = (out > left ? out - left : 0) + tp->retrans_out;
	e->total_retrans = tp->total_retrans;
	return tp;
}

/* Sequence numbers compared across a wrap. */
static __always_inline int seq_ge(__u32 a, __u32 b)
{
	return (__s32)(a - b) >= 0;
}

static __always_inline void forget_tuple(struct sock *sk)
{
	struct event e = {};
	if (!fill_sock(&e, sk))
		return;
	struct tuple_key k = {};
	__builtin_memcpy(k.laddr, e.laddr, 16);
	__builtin_memcpy(k.raddr, e.raddr, 16);
	k.netns = e.netns;
	k.lport = e.lport;
	k.rport = e.rport;
	bpf_map_delete_elem(&tuples, &k);
}

static __always_inline void fill_agg_identity(struct sock_agg *a, struct sock *sk, __u64 cookie)
{
	struct event e = {};
	if (!fill_sock(&e, sk))
		return;
	a->netns = e.netns;
	a->family = e.family;
	a->proto = e.proto;
	a->state = e.state;
	__builtin_memcpy(a->laddr, e.laddr, 16);
	__builtin_memcpy(a->raddr, e.raddr, 16);
	a->lport = e.lport;
	a->rport = e.rport;
	/* Received frames find a connected socket by its tuple. */
	if (e.lport && e.rport) {
		struct tuple_key k = {};
		__builtin_memcpy(k.laddr, e.laddr, 16);
		__builtin_memcpy(k.raddr, e.raddr, 16);
		k.netns = e.netns;
		k.lport = e.lport;
		k.rport = e.rport;
		bpf_map_update_elem(&tuples, &k, &cookie, BPF_ANY);
	}
}

/* This CPU's aggregate of a socket, made on first use; null when the map
 * is full (counted). `sk` may be null for frames joined by tuple (their
 * socket's entry exists already). */
static __always_inline struct sock_agg *agg_of(__u64 cookie, struct sock *sk)
{
	struct sock_agg *a = bpf_map_lookup_elem(&aggs, &cookie);
	if (!a) {
		if (!sk)
			return 0;
		/* The value is 624 bytes, too large for the stack: insert the
		 * zeros of a per-CPU scratch slot, then fill in place. */
		__u32 zero = 0;
		struct sock_agg *z = bpf_map_lookup_elem(&agg_zero, &zero);
		if (!z)
			return 0;
		long err = bpf_map_update_elem(&aggs, &cookie, z, BPF_NOEXIST);
		if (err && err != -17 /* EEXIST: another CPU made it */) {
			count_lost(EV_INTERVAL);
			return 0;
		}
		a = bpf_map_lookup_elem(&aggs, &cookie);
		if (!a)
			return 0;
	}
	/* Another CPU made the entry: this CPU's slot has no identity yet. */
	if (!a->family && sk)
		fill_agg_identity(a, sk, cookie);
	return a;
}

/* One sample of the socket's TCP state: sums, last, and this epoch's
 * minimum and maximum. */
static __always_inline void agg_tcp(struct sock_agg *a, struct tcp_sock *tp, __u64 now)
{
	__u32 out = tp->packets_out;
	__u32 left = tp->sacked_out + tp->lost_out;
	__u32 v[TCP_METRICS] = {
		tp->snd_cwnd,
		tp->snd_ssthresh,
		tp->srtt_us >> 3,
		(out > left ? out - left : 0) + tp->retrans_out,
		tp->snd_wnd,
	};
	__u64 e = epoch;
	__u32 b = e & 1;
	int fresh = a->mm_epoch[b] != e;
	if (fresh)
		a->mm_epoch[b] = e;
	for (int i = 0; i < TCP_METRICS; i++) {
		if (fresh || v[i] < a->tcp_min[b][i])
			a->tcp_min[b][i] = v[i];
		if (fresh || v[i] > a->tcp_max[b][i])
			a->tcp_max[b][i] = v[i];
		a->tcp_sum[i] += v[i];
		a->tcp_last[i] = v[i];
	}
	a->tcp_n += 1;
	a->tcp_last_ts = now;
}

/* log2 bucket of a delay: 0 for <= 0 ns, k for [2^(k-1), 2^k) ns. */
static __always_inline __u32 delay_bucket(__s64 d)
{
	if (d <= 0)
		return 0;
	__u64 v = d;
	__u32 k = 0;
	for (int i = 0; i < DELAY_BUCKETS - 1; i++) {
		if (!v)
			break;
		v >>= 1;
		k++;
	}
	return k < DELAY_BUCKETS ? k : DELAY_BUCKETS - 1;
}

static __always_inline void agg_delay(struct sock_agg *a, __s64 d)
{
	a->delay_n += 1;
	a->delay_sum_ns += d;
	__u32 k = delay_bucket(d);
	if (k < DELAY_BUCKETS)
		a->delay_hist[k] += 1;
}

/* Should an event on this socket be kept? Process-context callers pass
 * track=1: a socket that passes the task filter there is remembered.
 * State changes pass state=1 (see port_ok). */
static __always_inline int sock_in_cgroup(struct sock *sk);

static __always_inline int sock_wanted(struct sock *sk, __u64 cookie, int track, int state)
{
	__u16 lport = sk->__sk_common.skc_num;
	__u16 rport = bpf_ntohs(sk->__sk_common.skc_dport);
	if (!ports_pass(lport, rport)) {
		if (!state || !bpf_map_lookup_elem(&port_ok, &cookie))
			return 0;
	} else if (state && filter_ports_n) {
		__u8 one = 1;
		bpf_map_update_elem(&port_ok, &cookie, &one, BPF_ANY);
	}
	if (!task_filter_on())
		return 1;
	/* Without the per-packet programs no process context marks sockets:
	 * the walk level filters by the socket's own cgroup (--pid and
	 * --comm need --with-device). */
	if (walk && !aggregate)
		return sock_in_cgroup(sk);
	if (bpf_map_lookup_elem(&tracked, &cookie))
		return 1;
	if (track && task_passes()) {
		__u8 one = 1;
		bpf_map_update_elem(&tracked, &cookie, &one, BPF_ANY);
		return 1;
	}
	return 0;
}

static __always_inline int is_inet(struct sock *sk)
{
	__u16 family = sk->__sk_common.skc_family;
	return family == AF_INET || family == AF_INET6;
}

/* The default mode's send and receive: bytes, the caller, a TCP sample,
 * and for writes the write-to-transmission delay (MAGNeT's modulation) of
 * a sample of them: a write whose last byte already left during the call
 * (negative: from that transmission to the call's return), or, when none
 * is awaited, the write the next transmissions are matched against. One
 * awaited write per socket keeps the state small and shared by the CPUs
 * without locks; a write made while another is awaited is not sampled. */
static __always_inline int app_agg(__u32 type, struct sock *sk, __u64 cookie, int ret)
{
	struct sock_agg *a = agg_of(cookie, sk);
	if (!a)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u64 pt = bpf_get_current_pid_tgid();
	if (a->tid != (__u32)pt || !a->pid) {
		a->pid = pt >> 32;
		a->tid = (__u32)pt;
		bpf_get_current_comm(a->comm, sizeof(a->comm));
	}
	a->app_ts = now;
	__u32 bytes = ret > 0 ? ret : 0;
	if (type == EV_SEND) {
		a->app_sent += bytes;
		a->app_writes += 1;
	} else {
		a->app_received += bytes;
		a->app_reads += 1;
	}
	if (sk->sk_protocol != IPPROTO_TCP)
		return 0;
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);
	if (!tp)
		return 0;
	agg_tcp(a, tp, now);
	if (type != EV_SEND || !bytes || !want_dev || !want_delay)
		return 0;
	struct wire_state *w = bpf_sk_storage_get(&wire, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (!w)
		return 0;
	__u32 end = tp->write_seq;
	if (w->have_end && seq_ge(w->max_end, end)) {
		/* write_seq is the end of everything written, so the segment
		 * that reached it carried this call's last byte. */
		agg_delay(a, (__s64)w->sent_ts - (__s64)now);
	} else if (!w->pending) {
		w->pending_seq = end;
		w->pending_ts = now;
		w->pending = 1;
	}
	return 0;
}

static __always_inline int app_event(__u32 type, struct sock *sk, int ret, int flags)
{
	if (!sk || !is_inet(sk))
		return 0;
	/* A non-blocking socket with nothing to do says EAGAIN constantly. */
	if (ret == 0 || ret == -EAGAIN)
		return 0;
	__u64 cookie = sock_cookie(sk);
	if (!sock_wanted(sk, cookie, 1, 0))
		return 0;
	if (aggregate)
		return app_agg(type, sk, cookie, ret);
	struct event *e = reserve(type);
	if (!e)
		return 0;
	e->cookie = cookie;
	fill_sock(e, sk);
	e->ret = ret;
	e->bytes = ret > 0 ? ret : 0;
	if (e->proto == IPPROTO_TCP) {
		struct tcp_sock *tp = fill_tcp(e, sk);
		/* Where the application's bytes end in sequence space: the
		 * analysis matches it to the segment that carried that byte. */
		if (tp)
			e->seq = type == EV_SEND ? tp->write_seq : tp->copied_seq;
	}
	submit(e);
	return 0;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(on_send, struct sock *sk, int ret, int flags)
{
	return app_event(EV_SEND, sk, ret, flags);
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(on_recv, struct sock *sk, int ret, int flags)
{
	return app_event(EV_RECV, sk, ret, flags);
}

SEC("tp_btf/tcp_probe")
int BPF_PROG(on_tcp_probe, struct sock *sk, struct sk_buff *skb)
{
	__u64 cookie = sock_cookie(sk);
	if (!sock_wanted(sk, cookie, 0, 0))
		return 0;
	if (aggregate) {
		struct sock_agg *a = agg_of(cookie, sk);
		struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);
		if (a && tp) {
			a->segs_in += 1;
			agg_tcp(a, tp, bpf_ktime_get_ns());
		}
		return 0;
	}
	struct event *e = reserve(EV_TCP_PROBE);
	if (!e)
		return 0;
	e->cookie = cookie;
	fill_sock(e, sk);
	struct tcp_sock *tp = fill_tcp(e, sk);
	e->bytes = skb->len;
	if (tp)
		e->seq = tp->rcv_nxt;
	submit(e);
	return 0;
}

/* Is the socket in the --cgroup directory (its own cgroup, as the kernel
 * recorded it when the socket was made)? */
static __always_inline int sock_in_cgroup(struct sock *sk)
{
	if (!filter_cgroup)
		return 1;
	struct cgroup *cg = BPF_CORE_READ(sk, sk_cgrp_data.cgroup);
	if (!cg)
		return 0;
	return BPF_CORE_READ(cg, kn, id) == filter_cgroup;
}

/* Has the socket queued its FIN (which takes one sequence number after
 * the application's last byte)? It went through FIN_WAIT1 or LAST_ACK:
 * `st` is its state (at CLOSE, the state it closed from). */
static __always_inline int fin_queued(__u8 st)
{
	return st == 4 /* FIN_WAIT1 */ || st == 5 /* FIN_WAIT2 */ || st == 11 /* CLOSING */ ||
	       st == 9 /* LAST_ACK */;
}

#define SOCK_DONE 1

/* A TCP socket's counters and state, as tcp_info reports them, into `w`.
 * `tp` is a BTF pointer (plain loads; the verifier makes them safe);
 * `st` as for fin_queued; `start` the socket's walk state, if it has one. */
static __always_inline int fill_walk(struct sock_walk *w, struct tcp_sock *tp, __u64 cookie,
				     __u8 st, struct walk_state *start)
{
	struct sock *sk = (struct sock *)tp;
	__u16 family = sk->__sk_common.skc_family;
	if (family != AF_INET && family != AF_INET6)
		return 0;
	__builtin_memset(w, 0, sizeof(*w));
	w->cookie = cookie;
	w->ts_ns = bpf_ktime_get_ns();
	w->netns = sk->__sk_common.skc_net.net->ns.inum;
	w->family = family;
	w->state = sk->__sk_common.skc_state;
	w->lport = sk->__sk_common.skc_num;
	w->rport = bpf_ntohs(sk->__sk_common.skc_dport);
	if (family == AF_INET) {
		v4_mapped(w->laddr, sk->__sk_common.skc_rcv_saddr);
		v4_mapped(w->raddr, sk->__sk_common.skc_daddr);
	} else {
		BPF_CORE_READ_INTO(&w->laddr, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8);
		BPF_CORE_READ_INTO(&w->raddr, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr8);
	}
	w->bytes_sent = tp->bytes_sent;
	w->bytes_received = tp->bytes_received;
	w->bytes_acked = tp->bytes_acked;
	w->bytes_retrans = tp->bytes_retrans;
	w->segs_in = tp->segs_in;
	w->segs_out = tp->segs_out;
	w->data_segs_in = tp->data_segs_in;
	w->data_segs_out = tp->data_segs_out;
	w->total_retrans = tp->total_retrans;
	if (bpf_core_field_exists(tp->total_rto)) {
		w->total_rto = tp->total_rto;
		w->have |= WALK_HAVE_RTO;
	}
	/* The application's bytes end before a FIN: ours once queued, the
	 * peer's once the application has read to it (SOCK_DONE: it came,
	 * and then copied_seq reaches rcv_nxt only past it). */
	w->write_seq = tp->write_seq - fin_queued(st);
	__u32 copied = tp->copied_seq;
	if ((sk->__sk_common.skc_flags & (1UL << SOCK_DONE)) && copied == tp->rcv_nxt)
		copied -= 1;
	w->copied_seq = copied;
	w->snd_cwnd = tp->snd_cwnd;
	w->ssthresh = tp->snd_ssthresh;
	w->srtt_us = tp->srtt_us >> 3;
	w->rttvar_us = tp->mdev_us >> 2;
	w->snd_wnd = tp->snd_wnd;
	w->rcv_wnd = tp->rcv_wnd;
	__u32 out = tp->packets_out;
	__u32 left = tp->sacked_out + tp->lost_out;
	w->packets_out = out;
	w->in_flight = (out > left ? out - left : 0) + tp->retrans_out;
	if (start && start->started) {
		w->write_seq0 = start->write_seq;
		w->copied_seq0 = start->copied_seq;
		if (!w->lport)
			w->lport = start->lport;
		w->have |= WALK_HAVE_START;
	}
	if (!start || !start->reported)
		w->have |= WALK_FIRST;
	w->mss_cache = tp->mss_cache;
	w->rate_delivered = tp->rate_delivered;
	w->rate_interval_us = tp->rate_interval_us;
	/* tcp_get_info_chrono_stats(): the running period counts too. */
	__u32 hz = CONFIG_HZ;
	if (hz) {
		__u32 us_per_jiffy = 1000000 / hz;
		__u64 busy = tp->chrono_stat[0];
		__u64 rwnd = tp->chrono_stat[1];
		__u64 sndbuf = tp->chrono_stat[2];
		__u8 ty = tp->chrono_type;
		__u32 running = (__u32)bpf_jiffies64() - tp->chrono_start;
		if (ty == 1)
			busy += running;
		else if (ty == 2)
			rwnd += running;
		else if (ty == 3)
			sndbuf += running;
		w->busy_us = (busy + rwnd + sndbuf) * us_per_jiffy;
		w->rwnd_limited_us = rwnd * us_per_jiffy;
		w->sndbuf_limited_us = sndbuf * us_per_jiffy;
		w->have |= WALK_HAVE_CHRONO;
	}
	return 1;
}

static __always_inline struct sock_walk *walk_buf(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&walk_scratch, &zero);
}

/* A socket at CLOSE leaves its last counters for the next walk: it is no
 * longer in the table the walk reads. */
static __always_inline void keep_final(struct sock *sk, __u64 cookie, __u8 oldstate)
{
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);
	struct sock_walk *w = walk_buf();
	if (!tp || !w || !fill_walk(w, tp, cookie, oldstate, bpf_sk_storage_get(&starts, sk, 0, 0)))
		return;
	w->final = 1;
	if (bpf_map_update_elem(&finals, &cookie, w, BPF_ANY))
		count_lost(EV_INTERVAL);
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(on_state, struct sock *sk, int oldstate, int newstate)
{
	if (sk->sk_protocol != IPPROTO_TCP)
		return 0;
	__u64 cookie = sock_cookie(sk);
	/* connect() moves a socket to SYN_SENT in the caller's context. */
	if (!sock_wanted(sk, cookie, newstate == TCP_SYN_SENT, 1))
		return 0;
	if (newstate == TCP_CLOSE)
		bpf_map_delete_elem(&port_ok, &cookie);
	if (walk && newstate == TCP_ESTABLISHED) {
		struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);
		struct walk_state *st =
			tp ? bpf_sk_storage_get(&starts, sk, 0, BPF_SK_STORAGE_GET_F_CREATE) : 0;
		if (st) {
			st->write_seq = tp->write_seq;
			st->copied_seq = tp->copied_seq;
			st->lport = sk->__sk_common.skc_num;
			st->started = 1;
		}
	}
	/* A listener has no counters to leave. */
	if (walk && newstate == TCP_CLOSE && oldstate != 10 /* TCP_LISTEN */)
		keep_final(sk, cookie, oldstate);
	if (aggregate) {
		struct sock_agg *a = agg_of(cookie, sk);
		if (a) {
			a->state_changes += 1;
			/* The tuple is whole from ESTABLISHED on (a connecting
			 * socket gets its local port after SYN_SENT). */
			if (newstate == TCP_ESTABLISHED)
				fill_agg_identity(a, sk, cookie);
			a->state = newstate;
			if (newstate == TCP_CLOSE)
				a->closed = 1;
		}
		if (newstate == TCP_CLOSE)
			forget_tuple(sk);
	}
	struct event *e = reserve(EV_STATE);
	if (!e)
		return 0;
	e->cookie = cookie;
	fill_sock(e, sk);
	fill_tcp(e, sk);
	e->old_state = oldstate;
	e->state = newstate;
	submit(e);
	return 0;
}

SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(on_retransmit, struct sock *sk, struct sk_buff *skb, int err)
{
	__u64 cookie = sock_cookie(sk);
	if (!sock_wanted(sk, cookie, 0, 0))
		return 0;
	if (aggregate) {
		struct sock_agg *a = agg_of(cookie, sk);
		if (a) {
			__u32 se[2] = {};
			bpf_probe_read_kernel(se, sizeof(se), &skb->cb[0]);
			a->retransmits += 1;
			a->retransmitted += se[1] - se[0];
		}
	}
	struct event *e = reserve(EV_RETRANSMIT);
	if (!e)
		return 0;
	e->cookie = cookie;
	fill_sock(e, sk);
	fill_tcp(e, sk);
	/* TCP_SKB_CB(skb)->seq and ->end_seq open skb->cb. */
	__u32 se[2] = {};
	bpf_probe_read_kernel(se, sizeof(se), &skb->cb[0]);
	e->seq = se[0];
	e->ack = se[1];
	e->bytes = se[1] - se[0];
	e->ret = err;
	submit(e);
	return 0;
}

/* What a device program reads from a frame before it decides to keep it. */
struct frame {
	__u8 laddr[16];
	__u8 raddr[16];
	__u32 payload;
	__u32 seq;
	__u32 ack;
	__u16 lport;
	__u16 rport;
	__u8 family;
	__u8 proto;
	__u8 tcp_flags;
};

/* Reads a frame's IP and TCP/UDP headers. `l3` is where the IP header
 * starts (an offset from skb->head), `l3_len` the frame's bytes from there
 * on; `local_is_src` says which end of the packet is this host. Returns 0
 * for frames that are not IP. */
static __always_inline int parse_frame(struct frame *f, struct sk_buff *skb, unsigned char *head,
				       __u16 l3, __u32 l3_len, int local_is_src)
{
	__u16 proto = bpf_ntohs(skb->protocol);
	/* The IP and transport headers in one read: 60 bytes hold IPv6 + TCP,
	 * and IPv4 + TCP unless the IP header has options. Past a short
	 * frame's end they read the rest of its buffer, which is ignored. */
	__u8 h[60];
	__u8 opt_th[20];
	__u8 *th;
	__u32 l4_off, ip_payload;
	if (bpf_probe_read_kernel(h, sizeof(h), head + l3))
		return 0;
	if (proto == ETH_P_IP) {
		__u32 ihl = (h[0] & 0x0f) * 4;
		if (ihl < 20)
			return 0;
		f->family = AF_INET;
		f->proto = h[9];
		__u32 total = (h[2] << 8) | h[3];
		/* GSO super-frames carry 0 when over 64 KiB. */
		ip_payload = total > ihl ? total - ihl : 0;
		l4_off = ihl;
		__be32 s, d;
		__builtin_memcpy(&s, h + 12, 4);
		__builtin_memcpy(&d, h + 16, 4);
		v4_mapped(local_is_src ? f->laddr : f->raddr, s);
		v4_mapped(local_is_src ? f->raddr : f->laddr, d);
		if (ihl == 20) {
			th = h + 20;
		} else {
			if (bpf_probe_read_kernel(opt_th, sizeof(opt_th), head + l3 + ihl))
				return 1;
			th = opt_th;
		}
	} else if (proto == ETH_P_IPV6) {
		f->family = AF_INET6;
		f->proto = h[6];
		ip_payload = (h[4] << 8) | h[5];
		l4_off = 40;
		__builtin_memcpy(local_is_src ? f->laddr : f->raddr, h + 8, 16);
		__builtin_memcpy(local_is_src ? f->raddr : f->laddr, h + 24, 16);
		th = h + 40;
	} else {
		return 0;
	}
	if (f->proto == IPPROTO_TCP) {
		__u16 sp = (th[0] << 8) | th[1], dp = (th[2] << 8) | th[3];
		f->lport = local_is_src ? sp : dp;
		f->rport = local_is_src ? dp : sp;
		__u32 seq = ((__u32)th[4] << 24) | ((__u32)th[5] << 16) | ((__u32)th[6] << 8) | th[7];
		f->ack = ((__u32)th[8] << 24) | ((__u32)th[9] << 16) | ((__u32)th[10] << 8) | th[11];
		__u32 doff = (th[12] >> 4) * 4;
		f->tcp_flags = th[13];
		/* The frame's length from the IP header on counts a GSO
		 * super-frame whole (its IP length may be 0 past 64 KiB); the
		 * IP length, when smaller, trims link-layer padding. */
		__u32 pay = l3_len > l4_off + doff ? l3_len - l4_off - doff : 0;
		if (ip_payload >= doff && ip_payload - doff < pay)
			pay = ip_payload - doff;
		f->payload = pay;
		/* SYN and FIN take one sequence number each. */
		f->seq = seq + pay + ((th[13] & 0x02) ? 1 : 0) + ((th[13] & 0x01) ? 1 : 0);
	} else if (f->proto == IPPROTO_UDP) {
		__u16 sp = (th[0] << 8) | th[1], dp = (th[2] << 8) | th[3];
		f->lport = local_is_src ? sp : dp;
		f->rport = local_is_src ? dp : sp;
		__u16 ulen = (th[4] << 8) | th[5];
		f->payload = ulen > 8 ? ulen - 8 : 0;
	}
	return 1;
}

/* The default mode's device frame: payload and frames of its socket (a
 * received frame's found by namespace and 4-tuple), and for a transmitted
 * TCP segment the awaited write it completes (see app_agg). Frames of no
 * known socket are left out: nothing per socket to add them to. */
static __always_inline void dev_agg(__u32 type, const struct frame *f, struct sk_buff *skb,
				    __u64 cookie)
{
	struct sock *sk = 0;
	if (type == EV_DEV_RECV) {
		struct tuple_key k = {};
		__builtin_memcpy(k.laddr, f->laddr, 16);
		__builtin_memcpy(k.raddr, f->raddr, 16);
		struct net_device *dev = skb->dev;
		k.netns = dev ? dev->nd_net.net->ns.inum : 0;
		k.lport = f->lport;
		k.rport = f->rport;
		__u64 *c = bpf_map_lookup_elem(&tuples, &k);
		if (!c)
			return;
		cookie = *c;
	} else {
		if (!cookie)
			return;
		sk = skb->sk;
		/* A SYN-ACK's request socket or a time-wait socket is not a
		 * whole socket: no aggregate is made for it (an existing one
		 * still counts the frame). */
		if (!sk)
			return;
		__u8 st = sk->__sk_common.skc_state;
		if (st == TCP_NEW_SYN_RECV || st == TCP_TIME_WAIT)
			sk = 0;
	}
	struct sock_agg *a = agg_of(cookie, sk);
	if (!a)
		return;
	if (type == EV_DEV_RECV) {
		a->dev_received += f->payload;
		a->dev_frames_received += 1;
		return;
	}
	a->dev_sent += f->payload;
	a->dev_frames_sent += 1;
	if (f->proto != IPPROTO_TCP || !sk || !want_delay)
		return;
	struct wire_state *w = bpf_sk_storage_get(&wire, sk, 0, 0);
	if (!w)
		return;
	__u64 now = bpf_ktime_get_ns();
	if (!w->have_end || !seq_ge(w->max_end, f->seq)) {
		w->max_end = f->seq;
		w->sent_ts = now;
		w->have_end = 1;
	}
	if (w->pending && seq_ge(f->seq, w->pending_seq)) {
		w->pending = 0;
		agg_delay(a, (__s64)now - (__s64)w->pending_ts);
	}
}

/* Keeps a parsed frame: the port filter, --no-device-acks, then a record
 * of DEV_EVENT_SIZE bytes, every one of them written (no memset). A TCP
 * frame with no payload and no SYN, FIN or RST is a quarter of a bulk
 * transfer's events and nothing an analysis of payload or connection
 * state needs; --no-device-acks leaves those out. */
static __always_inline void dev_event(__u32 type, const struct frame *f, struct sk_buff *skb,
				      __u32 len, __u64 cookie)
{
	if (!ports_pass(f->lport, f->rport))
		return;
	if (!want_dev_acks && f->proto == IPPROTO_TCP && f->payload == 0 && !(f->tcp_flags & 0x07))
		return;
	if (aggregate) {
		dev_agg(type, f, skb, cookie);
		return;
	}
	struct event *e = reserve_bytes(type, DEV_EVENT_SIZE);
	if (!e)
		return;
	e->ts_ns = bpf_ktime_get_ns();
	e->cookie = cookie;
	e->type = type;
	e->family = f->family;
	e->proto = f->proto;
	e->state = 0;
	__builtin_memcpy(e->laddr, f->laddr, 16);
	__builtin_memcpy(e->raddr, f->raddr, 16);
	e->lport = f->lport;
	e->rport = f->rport;
	e->bytes = len;
	e->payload = f->payload;
	e->seq = f->seq;
	e->ack = f->ack;
	e->tcp_flags = f->tcp_flags;
	e->old_state = 0;
	e->tcp = 0;
	e->pad0 = 0;
	e->ret = 0;
	struct net_device *dev = skb->dev;
	if (dev) {
		e->ifindex = dev->ifindex;
		e->netns = dev->nd_net.net->ns.inum;
		/* Two plain loads; a string-read helper per frame costs more. */
		__builtin_memcpy(e->dev, dev->name, sizeof(e->dev));
	} else {
		e->ifindex = 0;
		e->netns = 0;
		__builtin_memset(e->dev, 0, sizeof(e->dev));
	}
	submit(e);
}

/* net_dev_start_xmit, not net_dev_xmit: when net_dev_xmit fires the driver
 * may already have freed the frame (the kernel's own event passes the
 * length separately for that reason); just before the driver takes it, the
 * frame and its socket are still there to read. */
SEC("tp_btf/net_dev_start_xmit")
int BPF_PROG(on_dev_xmit, struct sk_buff *skb, struct net_device *dev)
{
	if (!want_dev)
		return 0;
	unsigned char *head = skb->head;
	unsigned char *data = skb->data;
	__u16 nh = skb->network_header;
	__u32 len = skb->len;
	/* Bytes before the IP header that skb->len counts (the link header). */
	__u64 link = (__u64)(head + nh) - (__u64)data;
	if (link > 128)
		return 0;
	struct sock *sk = skb->sk;
	__u64 cookie = 0;
	if (sk && is_inet(sk)) {
		cookie = sk->__sk_common.skc_cookie.counter;
		if (task_filter_on() && !bpf_map_lookup_elem(&tracked, &cookie))
			return 0;
	} else if (task_filter_on()) {
		return 0;
	}
	struct frame f = {};
	if (parse_frame(&f, skb, head, nh, len - link, 1))
		dev_event(EV_DEV_XMIT, &f, skb, len, cookie);
	return 0;
}

/* The socket of a received frame is not known yet here (it is looked up
 * later in the stack); user space joins these events to sockets by
 * network namespace and 4-tuple. */
SEC("tp_btf/netif_receive_skb")
int BPF_PROG(on_dev_recv, struct sk_buff *skb)
{
	if (!want_dev || task_filter_on())
		return 0;
	unsigned char *head = skb->head;
	unsigned char *data = skb->data;
	__u32 len = skb->len;
	/* skb->data is at the IP header here (the link header was pulled). */
	__u64 l3 = (__u64)data - (__u64)head;
	if (l3 > 0xffff)
		return 0;
	struct frame f = {};
	if (parse_frame(&f, skb, head, (__u16)l3, len, 0))
		dev_event(EV_DEV_RECV, &f, skb, len, 0);
	return 0;
}

/* sock_ops on a cgroup: the kernel's own per-socket callbacks. */
SEC("sockops")
int on_sockops(struct bpf_sock_ops *ops)
{
	__u32 op = ops->op;
	if (op == BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB || op == BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB) {
		bpf_sock_ops_cb_flags_set(ops, BPF_SOCK_OPS_RTT_CB_FLAG | BPF_SOCK_OPS_RETRANS_CB_FLAG |
						       BPF_SOCK_OPS_STATE_CB_FLAG);
		return 1;
	}
	__u32 type;
	if (op == BPF_SOCK_OPS_RTT_CB)
		type = EV_SOCKOPS_RTT;
	else if (op == BPF_SOCK_OPS_RETRANS_CB)
		type = EV_SOCKOPS_RETRANS;
	else if (op == BPF_SOCK_OPS_STATE_CB)
		type = EV_SOCKOPS_STATE;
	else
		return 1;
	__u16 lport = ops->local_port;
	__u16 rport = bpf_ntohl(ops->remote_port) & 0xffff;
	if (!ports_pass(lport, rport))
		return 1;
	struct event *e = reserve(type);
	if (!e)
		return 1;
	e->cookie = bpf_get_socket_cookie(ops);
	e->family = ops->family;
	e->proto = IPPROTO_TCP;
	e->lport = lport;
	e->rport = rport;
	if (ops->family == AF_INET) {
		v4_mapped(e->laddr, ops->local_ip4);
		v4_mapped(e->raddr, ops->remote_ip4);
	} else {
		/* One 32-bit load per word: the verifier refuses a wider
		 * load of the context, which clang would otherwise merge. */
		__u32 a[4];
		for (int i = 0; i < 4; i++)
			a[i] = *(volatile __u32 *)&ops->local_ip6[i];
		__builtin_memcpy(e->laddr, a, 16);
		for (int i = 0; i < 4; i++)
			a[i] = *(volatile __u32 *)&ops->remote_ip6[i];
		__builtin_memcpy(e->raddr, a, 16);
	}
	e->tcp = 1;
	e->state = ops->state;
	e->snd_cwnd = ops->snd_cwnd;
	e->ssthresh = ops->snd_ssthresh;
	e->srtt_us = ops->srtt_us >> 3;
	e->snd_nxt = ops->snd_nxt;
	e->snd_una = ops->snd_una;
	e->packets_out = ops->packets_out;
	e->total_retrans = ops->total_retrans;
	if (op == BPF_SOCK_OPS_STATE_CB) {
		e->old_state = ops->args[0];
		e->state = ops->args[1];
	} else if (op == BPF_SOCK_OPS_RETRANS_CB) {
		e->seq = ops->args[0];
		e->bytes = ops->args[1]; /* segments */
		e->ret = ops->args[2];
	}
	submit(e);
	return 1;
}

/* One record per TCP socket of the iterator's network namespace, written
 * to the iterator's output (not the ring buffer): a snapshot is read whole
 * by user space, so nothing of it can be lost. */
SEC("iter/tcp")
int dump_tcp(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	struct seq_file *seq = ctx->meta->seq;
	if (!skc)
		return 0;
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(skc);
	if (!tp)
		return 0; /* time-wait and request sockets have no tcp_sock */
	struct sock *sk = (struct sock *)tp;
	struct event e = {};
	if (!fill_sock(&e, sk))
		return 0;
	if (!ports_pass(e.lport, e.rport))
		return 0;
	e.type = EV_SNAPSHOT;
	e.ts_ns = bpf_ktime_get_ns();
	e.cookie = bpf_get_socket_cookie(sk);
	fill_tcp(&e, sk);
	e.seq = tp->write_seq;
	e.ack = tp->copied_seq;
	e.ret = ctx->uid;
	bpf_seq_write(seq, &e, sizeof(e));
	return 0;
}

/* Writes the walk record of a socket the walk follows, unless nothing
 * it counts changed since the last one (user space keeps that). */
static __always_inline void walk_one(struct seq_file *seq, struct sock *sk, struct walk_state *ws)
{
	struct tcp_sock *tp = bpf_skc_to_tcp_sock(sk);
	if (!tp)
		return;
	__u8 state = sk->__sk_common.skc_state;
	if (state == 10 /* TCP_LISTEN */)
		return;
	__u32 segs_in = tp->segs_in, segs_out = tp->segs_out;
	__u32 write_seq = tp->write_seq, copied_seq = tp->copied_seq;
	if (ws->reported && ws->last_state == state && ws->last_segs_in == segs_in &&
	    ws->last_segs_out == segs_out && ws->last_write_seq == write_seq &&
	    ws->last_copied_seq == copied_seq)
		return;
	if (!ports_pass(sk->__sk_common.skc_num, bpf_ntohs(sk->__sk_common.skc_dport)))
		return;
	if (!sock_in_cgroup(sk))
		return;
	struct sock_walk *w = walk_buf();
	if (!w || !fill_walk(w, tp, bpf_get_socket_cookie(sk), state, ws))
		return;
	ws->reported = 1;
	ws->last_state = state;
	ws->last_segs_in = segs_in;
	ws->last_segs_out = segs_out;
	ws->last_write_seq = write_seq;
	ws->last_copied_seq = copied_seq;
	bpf_seq_write(seq, w, sizeof(*w));
}

/* The walk: every socket the walk level follows (see `starts`), in all
 * namespaces at once. */
SEC("iter/bpf_sk_storage_map")
int walk_tcp(struct bpf_iter__bpf_sk_storage_map *ctx)
{
	struct sock *sk = ctx->sk;
	struct walk_state *ws = ctx->value; /* the socket's own, writable */
	if (!sk || !ws)
		return 0;
	walk_one(ctx->meta->seq, sk, ws);
	return 0;
}

/* The TCP iterator's socket, or NULL: time-wait and request sockets have
 * no tcp_sock. */
static __always_inline struct sock *iter_tcp_sock(struct bpf_iter__tcp *ctx)
{
	struct sock_common *skc = ctx->sk_common;
	if (!skc)
		return NULL;
	return (struct sock *)bpf_skc_to_tcp_sock(skc);
}

/* The same walk where the kernel refuses iterators over socket storage:
 * every TCP socket of the namespace (run in each), those followed walked.
 * Slower (every bucket of the socket table, once per namespace) and blind
 * to namespaces user space cannot enter, so only a fallback. */
SEC("iter/tcp")
int walk_tcp_scan(struct bpf_iter__tcp *ctx)
{
	struct sock *sk = iter_tcp_sock(ctx);
	if (!sk)
		return 0;
	struct walk_state *ws = bpf_sk_storage_get(&starts, sk, 0, 0);
	if (ws)
		walk_one(ctx->meta->seq, sk, ws);
	return 0;
}

/* Once per namespace at the start: the TCP sockets already open join the
 * walk (their first records are the baselines). */
SEC("iter/tcp")
int enroll_tcp(struct bpf_iter__tcp *ctx)
{
	struct sock *sk = iter_tcp_sock(ctx);
	if (!sk)
		return 0;
	if (sk->__sk_common.skc_state == 10 /* TCP_LISTEN */)
		return 0;
	if (!ports_pass(sk->__sk_common.skc_num, bpf_ntohs(sk->__sk_common.skc_dport)) ||
	    !sock_in_cgroup(sk))
		return 0;
	struct walk_state *ws = bpf_sk_storage_get(&starts, sk, 0, BPF_SK_STORAGE_GET_F_CREATE);
	if (ws)
		walk_one(ctx->meta->seq, sk, ws);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
